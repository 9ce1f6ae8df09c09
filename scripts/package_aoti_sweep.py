"""Rule package_aoti_sweep: one AOTInductor package with dynamic batch and resolution for the whole sweep grid.
A failure is recorded in meta.json (the sweep's aoti rows carry it)."""
import os

# Inductor compiles with as many workers as the rule's threads, so that timing jobs beside it keep their cores.
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = str(snakemake.threads)

from abstraction_cost.data.specs import spec
from abstraction_cost.measure import device as devices
from abstraction_cost.study_a import aoti_dynamic
from abstraction_cost.study_a.sweep.cells import SweepSettings
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
config = snakemake.config
settings = SweepSettings.from_config(config)
ds = spec(config["study_a"]["backends"]["dataset"], config)
device = devices.select(config)
if settings.require_gpu and device.type != "cuda":
    meta = aoti_dynamic.not_run(snakemake.output[0],
                                "no CUDA GPU on this machine and study_a.sweep.require_gpu is true")
else:
    devices.apply_numerics(config)
    meta = aoti_dynamic.package(snakemake.input.weights, ds.channels, ds.classes, settings.batches,
                                settings.resolutions, device, snakemake.output[0])
if meta["status"] == "ok":
    log.info("packaged %s for %s in %.1f s", snakemake.output[0], device, meta["prepare_s"])
else:
    log.warning("no AOTInductor package (%s): %s\n%s", meta["status"], meta["message"], meta.get("traceback", ""))
