# Datasets: download (real datasets, through torchvision), prepare (every source, into the prepared format),
# init weights per (dataset, scheme, seed), and one sample order per (dataset, seed) for every backend.
import os

from abstraction_cost.data import prepared as prepared_data

# jobs of seconds (and the downloads, which want the login node's network) run where Snakemake runs
localrules: download_dataset, init_weights, sample_order


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


rule download_dataset:
    output:
        f"{DATA_ROOT}/{{dataset}}/download.json",
    log:
        "logs/data/download-{dataset}.log",
    params:
        root=lambda w: f"{DATA_ROOT}/{w.dataset}",
        config=reads("data.mirror"),
    resources:
        network=1,
    priority: INPUT_PRIORITY
    script:
        "../../scripts/download_dataset.py"


rule prepare_dataset:
    input:
        prepare_source,
    output:
        directory(PREPARED),
    log:
        "logs/data/prepare-{dataset}.log",
    params:
        root=lambda w: f"{DATA_ROOT}/{w.dataset}",
        config=reads("seed", "data", but=("data.mirror", "data.root")),
    priority: INPUT_PRIORITY
    script:
        "../../scripts/prepare_dataset.py"


rule init_weights:
    output:
        INIT_WEIGHTS,
    log:
        "logs/data/init-{dataset}-{init}-{seed}.log",
    priority: INPUT_PRIORITY
    script:
        "../../scripts/init_weights.py"


rule sample_order:
    input:
        PREPARED,
    output:
        SAMPLE_ORDER,
    log:
        "logs/data/order-{dataset}-{seed}-{epochs}.log",
    priority: INPUT_PRIORITY
    script:
        "../../scripts/sample_order.py"
