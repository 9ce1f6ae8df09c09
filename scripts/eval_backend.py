"""Rule eval_backend: one implementation of ResNet-50 evaluated on the comparison's batch (backends/eval_job.py)."""
from abstraction_cost.backends import eval_job
from abstraction_cost.workflow import setup_logging

setup_logging(snakemake)
eval_job.run(snakemake, snakemake.wildcards.implementation, snakemake.wildcards.numerics)
