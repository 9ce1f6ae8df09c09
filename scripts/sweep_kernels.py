"""Rule sweep_kernels_job: the top kernels of one implementation in one numerics at the kernel point
(study_a/sweep/kernels.py)."""
from abstraction_cost.measure import gpu_slots
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
gpu_slots.stage(snakemake)  # first: this job starts beside the one timing on its GPU, off the timing cores

from abstraction_cost.study_a.sweep import kernels as sweep_kernels  # noqa: E402

gpu_slots.take(snakemake, log)  # after the imports, before CUDA starts: this job's GPU slot, once it is free

sweep_kernels.run(snakemake)
gpu_slots.release(log)  # last: the slot to the next job while this one exits, off the timing cores
