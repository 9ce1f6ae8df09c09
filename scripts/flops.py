"""Rule flops: FLOPs per model and input (derived/flops.py) for Study A's sweep grid and backend comparison and
Study B's vision models, counted on the meta device (no GPU, no weights)."""
import torch

from abstraction_cost import tables
from abstraction_cost.backends.sweep_cells import SweepSettings
from abstraction_cost.data.specs import spec
from abstraction_cost.derived import flops
from abstraction_cost.measure.run import measured_run
from abstraction_cost.models import blocks, resnet
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
config = snakemake.config
backends = config["study_a"]["backends"]
dataset = spec(backends["dataset"], config)
sweep = SweepSettings.from_config(config)
points = sorted({(b, r) for b in sweep.batches for r in sweep.resolutions}
                | {(backends["batch_size"], backends["resolution"])})
cases = [("study_a", "resnet50", lambda: resnet.resnet50(dataset.channels, dataset.classes), dataset.channels, b, r)
         for b, r in points]
vision = config["study_b"]["models"]
for pair, models in vision["models"].items():
    for name in models:
        for batch in vision["batch_size"][pair]:
            cases.append(("study_b", name, lambda name=name: blocks.build(name, config["seed"]), 3, batch,
                          vision["resolution"]))
cases = list({(c[0], c[1], c[4], c[5]): c for c in cases}.values())   # a model on both pairs: counted once
with measured_run(config, rule="flops", job={}, env_path=snakemake.output.env, device=torch.device("cpu")) as run:
    rows = flops.flops_rows(cases, run.run_id)
df = tables.write("flops", rows, snakemake.output.table)
log.info("flops: %d rows, %d not counted", df.height, df.filter(df["status"] != "ok").height)
