"""Rule flops: FLOPs per model and input (derived/flops.py) for Study A's sweep grid and backend comparison and
Study B's vision models, counted on the meta device (no GPU, no weights)."""
import torch

from abstraction_cost import tables
from abstraction_cost.derived import flops
from abstraction_cost.measure.run import measured_run
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
config = snakemake.config
with measured_run(config, rule="flops", job={}, env_path=snakemake.output.env, device=torch.device("cpu")) as run:
    rows = flops.flops_rows(flops.cases(config), run.run_id)
df = tables.write("flops", rows, snakemake.output.table)
log.info("flops: %d rows, %d not counted", df.height, df.filter(df["status"] != "ok").height)
