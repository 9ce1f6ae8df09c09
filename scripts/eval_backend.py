"""Rule eval_backend: one implementation of ResNet-50 evaluated on the comparison's batch in every numerics of
study_a.backends.numerics, in one process (backends/eval_job.py)."""
from abstraction_cost.measure import gpu_slots
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
gpu_slots.take(snakemake, log)  # first, before torch is imported: this job's GPU slot

from abstraction_cost.backends import eval_job  # noqa: E402

eval_job.run_job(snakemake)
