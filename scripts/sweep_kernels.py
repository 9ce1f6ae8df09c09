"""Rule sweep_kernels_job: the top kernels of one implementation at the kernel point (backends/sweep_kernels.py)."""
from abstraction_cost.backends import sweep_kernels
from abstraction_cost.workflow import setup_logging

setup_logging(snakemake)
sweep_kernels.run(snakemake)
