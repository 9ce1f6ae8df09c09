"""Rule train_eager: ResNet-50 in PyTorch eager mode, one (dataset, init, seed)."""
import time

from abstraction_cost.measure import gpu_slots
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
gpu_slots.stage(snakemake)  # first: this job starts beside the one timing on its GPU, off the timing cores

from abstraction_cost.data.specs import spec  # noqa: E402
from abstraction_cost.models import resnet, weights_file  # noqa: E402
from abstraction_cost.study_a import eager  # noqa: E402
from abstraction_cost.study_a.training import job as training_job  # noqa: E402

gpu_slots.take(snakemake, log)  # after the imports, before CUDA starts: this job's GPU slot, once it is free


def trainer(run, data, order, weights_path, settings):
    ds = spec(snakemake.wildcards.dataset, snakemake.config)
    started = time.perf_counter()
    model = weights_file.load_into(resnet.resnet50(ds.channels, ds.classes), weights_path)
    built = time.perf_counter()
    model.to(run.device)   # the job's first CUDA work: its context starts here
    log.info("eager trainer: model and weights %.1f s, to the device %.1f s", built - started,
             time.perf_counter() - built)
    return eager.train(model, data, order, settings, run)


training_job.run(snakemake, "eager", trainer)
gpu_slots.release(log)  # last: the slot to the next job while this one exits, off the timing cores
