"""Rules concat_*: join the per-job parts of one table, and their environment rows, into whole tables."""
from abstraction_cost import tables
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
df = tables.concat(snakemake.params.table, snakemake.input.tables, snakemake.output.table)
env = tables.concat("environment", snakemake.input.envs, snakemake.output.env)
log.info("%s: %d rows from %d jobs (%d environment rows)", snakemake.params.table, df.height,
         len(snakemake.input.tables), env.height)
