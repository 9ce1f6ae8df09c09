"""Rule sample_order: the order in which every backend visits the training samples, per (seed, epoch)."""
from abstraction_cost.data import order, prepared
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
manifest = prepared.read_manifest(snakemake.input[0])
count = manifest["splits"]["train"]["count"] if manifest["status"] == "ok" else 0
order.write(snakemake.output[0], count, int(snakemake.wildcards.seed), int(snakemake.wildcards.epochs))
log.info("wrote %s: %s epochs of %d samples", snakemake.output[0], snakemake.wildcards.epochs, count)
