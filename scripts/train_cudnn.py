"""Rule train_cudnn: ResNet-50 written by hand on cuDNN and cuBLAS, one (dataset, init, seed).

The program (native/cudnn, `ac_cudnn train`) trains with eager's semantics and times its own steps; this process
launches it inside measured_run, so the same NVML sampler as for eager measures the device. It runs on a CUDA GPU
only: elsewhere the job writes one not_run row.
"""
from abstraction_cost.measure import gpu_slots
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
gpu_slots.stage(snakemake)  # first: this job starts beside the one timing on its GPU, off the timing cores

from abstraction_cost.programs import native  # noqa: E402
from abstraction_cost.study_a import cudnn  # noqa: E402
from abstraction_cost.study_a.training import job as training_job  # noqa: E402

gpu_slots.take(snakemake, log)  # after the imports, before CUDA starts: this job's GPU slot, once it is free


def trainer(run, data, order, weights_path, settings):
    if run.device.type != "cuda":
        return cudnn.not_run(run.device)
    command = cudnn.train_command(snakemake.input.program, snakemake.input.data, data.manifest, weights_path,
                                  snakemake.input.order, settings, snakemake.config, run.device)
    return cudnn.training_rows(run, native.launch(command, logger=log))


training_job.run(snakemake, "cudnn", trainer)
gpu_slots.release(log)  # last: the slot to the next job while this one exits, off the timing cores
