"""Rule download_dataset: download, verify and extract one real dataset; write download.json.

A failure (no network, wrong checksum, unsafe archive) is logged at ERROR level and recorded as
{"status": "failed", "message": ...}; the rule still succeeds, so the pipeline goes on and the dataset is
reported as missing (data/sources.py).
"""
from abstraction_cost.data import download
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
result = download.record(snakemake.wildcards.dataset, snakemake.params.root,
                         snakemake.config["data"].get("mirror"), snakemake.output[0])
if result["status"] == "ok":
    log.info("%s: %s", snakemake.wildcards.dataset, ", ".join(f["file"] for f in result["files"]))
