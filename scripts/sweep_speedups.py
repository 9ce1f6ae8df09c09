"""Rule sweep_speedups: each implementation's speed against eager per cell, from the interleaved sweep's paired
turns (study_a/sweep/summary.speedup_rows)."""
from abstraction_cost import tables
from abstraction_cost.study_a.sweep import summary as sweep_summary
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
rows = sweep_summary.speedup_rows(tables.read("sweep", snakemake.input.sweep),
                                  tables.read("sweep_blocks", snakemake.input.blocks))
df = tables.write("sweep_speedups", rows, snakemake.output[0])
log.info("sweep_speedups: %d rows, %d with an interval that excludes 1", df.height,
         int((df["speedup_includes_one"] == False).sum()) if df.height else 0)  # noqa: E712
