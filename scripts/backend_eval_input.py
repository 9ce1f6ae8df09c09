"""Rule backend_eval_input: the one batch every implementation evaluates, as a prepared directory.

Synthetic images of study_a.backends.dataset's channels and classes at study_a.backends.resolution (a class
pattern plus noise, deterministic), batch_size of them in the test split (and the same in train, which the
prepared format requires); normalised with their own per-channel mean and std, like every prepared dataset.
"""
from abstraction_cost.data import offline, prepared
from abstraction_cost.data.specs import DatasetSpec, spec
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
b = snakemake.config["study_a"]["backends"]
ds = spec(b["dataset"], snakemake.config)
shape = DatasetSpec(f"synthetic-{ds.name.removeprefix('synthetic-')}", ds.channels, b["resolution"], b["resolution"],
                    ds.class_names)
splits = offline.synthetic(shape, b["batch_size"], b["batch_size"])
prepared.write(snakemake.output[0], "backend-eval-input", splits, list(ds.class_names),
               [{"file": f"synthetic, seed {offline.SYNTHETIC_SEED}, shape of {ds.name}", "md5": None}])
log.info("wrote %s: %d images of %d×%d×%d", snakemake.output[0], b["batch_size"], ds.channels, b["resolution"],
         b["resolution"])
