# Datasets: download (real datasets, through torchvision), prepare (every source, into the prepared format),
# init weights per (dataset, scheme, seed), and one sample order per (dataset, seed) for every backend.


# jobs of seconds (and the downloads, which want the login node's network) run where Snakemake runs
localrules: download_dataset, init_weights, sample_order


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
    script:
        "../../scripts/download_dataset.py"


rule prepare_dataset:
    input:
        download_record,
    output:
        directory(PREPARED),
    log:
        "logs/data/prepare-{dataset}.log",
    params:
        root=lambda w: f"{DATA_ROOT}/{w.dataset}",
        config=reads("seed", "data", but=("data.mirror", "data.root")),
    script:
        "../../scripts/prepare_dataset.py"


rule init_weights:
    output:
        INIT_WEIGHTS,
    log:
        "logs/data/init-{dataset}-{init}-{seed}.log",
    script:
        "../../scripts/init_weights.py"


rule sample_order:
    input:
        PREPARED,
    output:
        SAMPLE_ORDER,
    log:
        "logs/data/order-{dataset}-{seed}-{epochs}.log",
    script:
        "../../scripts/sample_order.py"
