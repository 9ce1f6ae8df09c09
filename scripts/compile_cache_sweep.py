"""Rule compile_cache_sweep: one interleaved sweep job's torch.compile entries built into the sweep's Inductor cache
by the job's own workers, before the job (study_a/sweep/compile_warm_up.py)."""
import json

from abstraction_cost.study_a.sweep import compile_warm_up
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
manifest = compile_warm_up.run(snakemake)
log.info("%d entries over %d cells in %.1f s", len(manifest["builds"]), len(manifest["cells"]), manifest["seconds"])
with open(snakemake.output.manifest, "w") as f:
    json.dump(manifest, f, indent=1)
