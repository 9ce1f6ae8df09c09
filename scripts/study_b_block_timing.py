"""Rule study_b_block_timing: one building-block experiment, one device pair, one compile mode."""
from abstraction_cost.compile import inductor_env
from abstraction_cost.measure import gpu_slots
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
gpu_slots.stage(snakemake)  # first: this job starts beside the one timing on its GPU, off the timing cores
inductor_env.configure(snakemake.config, snakemake.params.cache_dir)   # before torch is imported

import torch  # noqa: E402

from abstraction_cost import tables  # noqa: E402
from abstraction_cost.measure.run import measured_run  # noqa: E402
from abstraction_cost.study_b.blocks.cases import TimingSettings, pair_device  # noqa: E402
from abstraction_cost.study_b.blocks.experiments import run_timing  # noqa: E402
from abstraction_cost.study_b.blocks.registry import experiment  # noqa: E402

gpu_slots.take(snakemake, log)  # after the imports, before CUDA starts: this job's GPU slot, once it is free

config = snakemake.config
w = snakemake.wildcards
device, _ = pair_device(w.pair, TimingSettings.from_config(config))
with measured_run(config, rule=snakemake.rule, job=dict(w), env_path=snakemake.output.env, device=device) as run:
    rows = run_timing(w.experiment, config, w.pair, w.mode, run.run_id,
                      require_gpu=config["study_b"]["blocks"]["require_gpu"],
                      cuda_available=torch.cuda.is_available())
df = tables.write(experiment(w.experiment).table, rows, snakemake.output.table)
log.info("%s %s/%s: %d rows, status %s", w.experiment, w.pair, w.mode, df.height,
         dict(df.group_by("status").len().iter_rows()))
gpu_slots.release(log)  # last: the slot to the next job while this one exits, off the timing cores
