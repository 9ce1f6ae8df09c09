"""Rule train_eager: ResNet-50 in PyTorch eager mode, one (dataset, init, seed)."""
from abstraction_cost.backends import eager, training_job
from abstraction_cost.data.specs import spec
from abstraction_cost.models import resnet, weights_file
from abstraction_cost.workflow import setup_logging

setup_logging(snakemake)


def trainer(run, data, order, weights_path, settings):
    ds = spec(snakemake.wildcards.dataset, snakemake.config)
    model = weights_file.load_into(resnet.resnet50(ds.channels, ds.classes), weights_path)
    return eager.train(model, data, order, settings, run)


training_job.run(snakemake, "eager", trainer)
