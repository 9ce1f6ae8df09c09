"""Rule sweep: one implementation over every cell of the sweep grid, every transfer mode, in each numerics
(backends/sweep.py)."""
from abstraction_cost.measure import gpu_slots
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
gpu_slots.take(snakemake, log)  # first, before torch is imported: this job's GPU slot

from abstraction_cost.backends import sweep  # noqa: E402

sweep.run(snakemake)
