# Datasets: download (real datasets, through torchvision), prepare (every source, into the prepared format),
# init weights per (dataset, scheme, seed), and one sample order per (dataset, seed) for every backend.
DATA_ROOT = config["data"]["root"]


def download_record(wildcards):
    if dataset_specs.spec(wildcards.dataset, config).downloads:
        return f"{DATA_ROOT}/{wildcards.dataset}/download.json"
    return []


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
        download_record,
    output:
        directory("results/data/prepared/{dataset}"),
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
