"""Rule sweep: one (implementation, transfer mode) over every cell of the sweep grid (backends/sweep.py)."""
from abstraction_cost.backends import sweep
from abstraction_cost.workflow import setup_logging

setup_logging(snakemake)
sweep.run(snakemake)
