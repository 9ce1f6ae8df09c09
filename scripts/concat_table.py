"""Rules concat_*: join the per-job parts of one table, and their environment rows where the rule has them (a
table whose run_ids are another table's, as sweep_blocks, has none of its own), into whole tables."""
from abstraction_cost import tables
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
df = tables.concat(snakemake.params.table, snakemake.input.tables, snakemake.output.table)
envs = hasattr(snakemake.output, "env")
env = tables.concat("environment", snakemake.input.envs, snakemake.output.env) if envs else None
log.info("%s: %d rows from %d jobs (%s environment rows)", snakemake.params.table, df.height,
         len(snakemake.input.tables), env.height if envs else "no")
