"""Rule package_aoti: torch.export + AOTInductor package of the eval ResNet-50, for this machine's device and
the comparison's batch and resolution. A failure is recorded in meta.json (the eval job turns it into a row)."""
import os

# Inductor compiles with as many workers as the rule's threads, so that timing jobs beside it keep their cores.
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = str(snakemake.threads)

from abstraction_cost.data.specs import spec
from abstraction_cost.measure import device as devices
from abstraction_cost.study_a import aoti
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
config = snakemake.config
b = config["study_a"]["backends"]
ds = spec(b["dataset"], config)
device = devices.select(config)
if b["require_gpu"] and device.type != "cuda":
    meta = aoti.not_run(snakemake.output[0], "no CUDA GPU on this machine and study_a.backends.require_gpu is true")
else:
    devices.apply_numerics(config)
    meta = aoti.package(snakemake.input.weights, ds.channels, ds.classes, b["batch_size"], b["resolution"], device,
                        snakemake.output[0])
if meta["status"] == "ok":
    log.info("packaged %s for %s in %.1f s", snakemake.output[0], device, meta["prepare_s"])
else:
    log.warning("no AOTInductor package (%s): %s\n%s", meta["status"], meta["message"], meta.get("traceback", ""))
