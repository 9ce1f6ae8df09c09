"""Rules compile_cache_blocks and compile_cache_model: one Study B timing job's graphs compiled into the pipeline's
Inductor cache, in parallel."""
import json

from abstraction_cost.study_b import compile_cache
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
manifest = compile_cache.warm(snakemake.config, snakemake.params.cache_dir, snakemake.threads,
                              job=snakemake.params.job)
log.info("%d tasks in %.1f s on %d workers (%d skipped)", len(manifest["tasks"]), manifest["seconds"],
         manifest["workers"], len(manifest["skipped"]))
with open(snakemake.output.manifest, "w") as f:
    json.dump(manifest, f, indent=1)
