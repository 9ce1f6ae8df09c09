"""Rule script_torchscript: the eager ResNet-50 with the comparison's weights through torch.jit.script (or trace)."""
from abstraction_cost.data.specs import spec
from abstraction_cost.study_a import torchscript
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
b = snakemake.config["study_a"]["backends"]
ds = spec(b["dataset"], snakemake.config)
meta = torchscript.save(snakemake.input.weights, ds.channels, ds.classes, b["resolution"], snakemake.output.module,
                        snakemake.output.meta)
if meta["method"] != "script":
    log.warning("torch.jit.script failed, traced instead: %s", meta["message"])
log.info("wrote %s (%s, %.1f s)", snakemake.output.module, meta["method"], meta["prepare_s"])
