"""Rule prepare_dataset: convert one dataset, once, into the prepared format every backend reads."""
from abstraction_cost.data import sources
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
manifest = sources.prepare(snakemake.wildcards.dataset, snakemake.config, snakemake.params.root, snakemake.output[0])
if manifest["status"] == "ok":
    log.info("prepared %s: %s", snakemake.wildcards.dataset,
             {k: v["count"] for k, v in manifest["splits"].items()})
else:
    log.error("%s is missing: %s", snakemake.wildcards.dataset, manifest["message"])
