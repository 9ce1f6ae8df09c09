"""Rule sweep_h2d: the host-to-device copy per (implementation, transfer) at the study's point (batch 32)."""
from abstraction_cost import tables
from abstraction_cost.study_a.sweep import summary as sweep_summary
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
batch, resolution = snakemake.params.point
df = tables.write("sweep_h2d", sweep_summary.h2d_rows(tables.read("sweep", snakemake.input.sweep), batch, resolution),
                  snakemake.output[0])
log.info("sweep_h2d: %d rows at batch %d", df.height, batch)
