"""Rule init_weights: one weights file per (dataset, init scheme, seed), read by every backend."""
from abstraction_cost.data.specs import spec
from abstraction_cost.models import init, resnet, weights_file
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
w = snakemake.wildcards
ds = spec(w.dataset, snakemake.config)
model = init.initialise(resnet.resnet50(ds.channels, ds.classes), w.init, int(w.seed))
weights_file.save(model.state_dict(), snakemake.output[0])
log.info("wrote %s: ResNet-50, %d channels in, %d classes, init %s, seed %s",
         snakemake.output[0], ds.channels, ds.classes, w.init, w.seed)
