"""Rules concat_*: join the per-job parts of one table, and their environment rows where the rule has them (a
table whose run_ids are another table's, as sweep_blocks, has none of its own), into whole tables; with input
`inputs` (the sweep's), rows left by a missing dataset say so (inputs_manifest.with_missing_inputs)."""
import polars as pl

from abstraction_cost import tables
from abstraction_cost.study_a import inputs_manifest
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
name = snakemake.params.table
df = pl.concat([tables.read(name, p) for p in snakemake.input.tables]) if snakemake.input.tables \
    else tables.frame(name, [])
if "inputs" in snakemake.input.keys():
    df = inputs_manifest.with_missing_inputs(df, snakemake.input.inputs)
df = tables.write(name, df, snakemake.output.table)
envs = hasattr(snakemake.output, "env")
env = tables.concat("environment", snakemake.input.envs, snakemake.output.env) if envs else None
log.info("%s: %d rows from %d jobs (%s environment rows)", name, df.height,
         len(snakemake.input.tables), env.height if envs else "no")
