"""Rule vision_model: every step of one vision model on one pair (study_b/models/job.py), one table part each."""
from pathlib import Path

from abstraction_cost.compile import inductor_env
from abstraction_cost.measure import gpu_slots
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
gpu_slots.stage(snakemake)  # first: this job starts beside the one timing on its GPU, off the timing cores
inductor_env.configure(snakemake.config, snakemake.params.cache_dir)   # before torch is imported
from abstraction_cost.programs import workers  # noqa: E402
workers.start_fork_server()   # with the job's environment: its imports overlap the job's start and layer step

from abstraction_cost import tables  # noqa: E402
from abstraction_cost.measure.run import measured_run  # noqa: E402
from abstraction_cost.measure.steps import StepStore  # noqa: E402
from abstraction_cost.study_b.models import job as vision_job  # noqa: E402

gpu_slots.take(snakemake, log)  # after the imports, before CUDA starts: this job's GPU slot, once it is free

w, config = snakemake.wildcards, snakemake.config
# finished steps kept beside the job's outputs (not among them, so a failed job's are not deleted)
store = StepStore(Path(snakemake.output.env).parent / "steps", vision_job.step_key(config, w.model, w.pair))
with measured_run(config, rule="vision_model", job=dict(w), env_path=snakemake.output.env,
                  device=vision_job.run_device(config, w.model, w.pair), run_id=store.run_id,
                  resumes=store.resumes) as run:
    out = vision_job.run_job(config, w.model, w.pair, run, log, store)
for name, rows in out.items():
    log.info("%s: %d rows", name, tables.write(name, rows, snakemake.output[name]).height)
store.clear()
gpu_slots.release(log)  # last: the slot to the next job while this one exits, off the timing cores
