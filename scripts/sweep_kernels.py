"""Rule sweep_kernels_job: the top kernels of one implementation in one numerics at the kernel point
(study_a/sweep/kernels.py)."""
from abstraction_cost.measure import gpu_slots
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
gpu_slots.take(snakemake, log)  # first, before torch is imported: this job's GPU slot

from abstraction_cost.study_a.sweep import kernels as sweep_kernels  # noqa: E402

sweep_kernels.run(snakemake)
