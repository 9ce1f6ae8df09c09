"""Rule environment: every measuring job's environment row, from the env sidecars of every table, once per run_id."""
import polars as pl

from abstraction_cost import tables
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
parts = [tables.read("environment", path) for path in snakemake.input]
rows = pl.concat(parts) if parts else pl.DataFrame(schema=tables.schema("environment"))
# A job whose rows went into two tables has its row in both sidecars.
env = tables.write("environment", rows.unique("run_id", keep="first", maintain_order=True), snakemake.output[0])
log.info("environment: %d jobs from %d sidecars", env.height, len(parts))
