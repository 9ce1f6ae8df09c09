# Datasets: download (real datasets, through torchvision), prepare (every source, into the prepared format),
# init weights per (dataset, scheme, seed), and one sample order per (dataset, seed) for every backend.
import os

from abstraction_cost.data import prepared as prepared_data

DATA_ROOT = config["data"]["root"]
PREPARED_DIR = "results/data/prepared"


# A damaged prepared dataset (a file whose size or sha256 is not the recorded one, data/prepared.py) is found when
# Snakemake starts (main process, dry runs too) and made out of date: its mtime (.snakemake_timestamp, Snakemake's
# for a directory output) set to 1970, older than its input, so that this run prepares it again and reruns what
# reads it. (Removing it would not do: Snakemake does not remake a missing input of jobs whose outputs exist.)
if workflow.is_main_process:
    for _dir in sorted(Path(PREPARED_DIR).glob("*/")):
        if _dir.name.startswith(".") or not (_damage := prepared_data.check(_dir)):
            continue
        for _path in (_dir / ".snakemake_timestamp", _dir):
            if _path.exists():
                os.utime(_path, (0, 0))
        logger.warning(f"{_damage.split('; rebuild it')[0]}: this run prepares {_dir} again")


def prepare_source(wildcards):
    """What a prepared dataset is made from: its download record, or the code that generates an offline one (an
    input either way, so that a damaged prepared dataset made older than it is prepared again)."""
    if dataset_specs.spec(wildcards.dataset, config).downloads:
        return f"{DATA_ROOT}/{wildcards.dataset}/download.json"
    return str(Path(workflow.basedir) / "src" / "abstraction_cost" / "data" / "offline.py")


rule download_dataset:
    output:
        f"{DATA_ROOT}/{{dataset}}/download.json",
    log:
        "logs/data/download-{dataset}.log",
    params:
        root=lambda w: f"{DATA_ROOT}/{w.dataset}",
    resources:
        network=1,
    script:
        "../../scripts/download_dataset.py"


rule prepare_dataset:
    input:
        prepare_source,
    output:
        directory(f"{PREPARED_DIR}/{{dataset}}"),
    log:
        "logs/data/prepare-{dataset}.log",
    params:
        root=lambda w: f"{DATA_ROOT}/{w.dataset}",
    script:
        "../../scripts/prepare_dataset.py"


rule init_weights:
    output:
        "results/data/init/{dataset}/{init}-seed{seed}.weights",
    log:
        "logs/data/init-{dataset}-{init}-{seed}.log",
    script:
        "../../scripts/init_weights.py"


rule sample_order:
    input:
        "results/data/prepared/{dataset}",
    output:
        "results/data/order/{dataset}/seed{seed}-epochs{epochs}.i32",
    log:
        "logs/data/order-{dataset}-{seed}-{epochs}.log",
    script:
        "../../scripts/sample_order.py"
