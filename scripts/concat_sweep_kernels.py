"""Rule concat_sweep_kernels: every implementation's kernel rows within kernels.top (the sweep's jobs rank every
kernel of the point), then the study's ReLU rows beside them."""
import polars as pl

from abstraction_cost import tables
from abstraction_cost.study_a import inputs_manifest
from abstraction_cost.study_a.sweep import summary as sweep_summary
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
measured = pl.concat([tables.read("sweep_kernels", p) for p in snakemake.input.tables], how="vertical")
measured = inputs_manifest.with_missing_inputs(sweep_summary.top_rows(measured, snakemake.params.top),
                                              snakemake.input.inputs)
study = tables.frame("sweep_kernels", sweep_summary.study_kernel_rows())
df = tables.write("sweep_kernels", pl.concat([measured, study]), snakemake.output.table)
env = tables.concat("environment", snakemake.input.envs, snakemake.output.env)
log.info("sweep_kernels: %d rows (%d environment rows)", df.height, env.height)
