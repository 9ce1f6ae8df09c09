"""Rule train_libtorch: ResNet-50 written with the LibTorch C++ frontend, one (dataset, init, seed).

The program (native/libtorch, `ac_libtorch train`) trains with eager's semantics and times its own steps; this
process launches it inside measured_run, so the same NVML sampler as for eager measures the device.
"""
from abstraction_cost.measure import gpu_slots
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
gpu_slots.stage(snakemake)  # first: this job starts beside the one timing on its GPU, off the timing cores

from abstraction_cost.programs import native  # noqa: E402
from abstraction_cost.study_a.training import job as training_job  # noqa: E402

gpu_slots.take(snakemake, log)  # after the imports, before CUDA starts: this job's GPU slot, once it is free


def trainer(run, data, order, weights_path, settings):
    command = native.train_command(snakemake.input.program, snakemake.input.data, data.manifest, weights_path,
                                   snakemake.input.order, settings, snakemake.config, run.device)
    return native.training_rows(run, native.launch(command, logger=log))


training_job.run(snakemake, "libtorch", trainer)
gpu_slots.release(log)  # last: the slot to the next job while this one exits, off the timing cores
