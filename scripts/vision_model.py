"""Rule vision_model: every step of one vision model on one pair (compiler/vision_job.py), one table part each."""
from abstraction_cost import tables
from abstraction_cost.compiler import vision_job
from abstraction_cost.compiler import vision_models as vm
from abstraction_cost.measure.run import measured_run
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
w, config = snakemake.wildcards, snakemake.config
with vm.compile_cache(config, snakemake.params.cache_dir), \
        measured_run(config, rule="vision_model", job=dict(w), env_path=snakemake.output.env,
                     device=vision_job.run_device(config, w.model, w.pair)) as run:
    out = vision_job.run_job(config, w.model, w.pair, run, log)
for name, rows in out.items():
    log.info("%s: %d rows", name, tables.write(name, rows, snakemake.output[name]).height)
