"""Rule sweep_inputs: study_a.sweep.pool test images of the prepared split, resized once per resolution; a
dataset that could not be obtained is recorded as missing (its sweep rows say so), not a failed job."""
from abstraction_cost.data import prepared
from abstraction_cost.study_a import inputs_manifest, transfer
from abstraction_cost.study_a.sweep.cells import SweepSettings
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
settings = SweepSettings.from_config(snakemake.config)
if missing := prepared.missing_reason(snakemake.input.data):
    inputs_manifest.write_missing(snakemake.output[0], missing)
    log.warning("no sweep inputs: %s", missing)
else:
    manifest = transfer.write_inputs(snakemake.input.data, settings.pool, settings.resolutions, snakemake.output[0])
    log.info("wrote %s: %d images of %d channels at resolutions %s", snakemake.output[0], manifest["pool"],
             manifest["channels"], manifest["resolutions"])
