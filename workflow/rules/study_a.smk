# Study A: ResNet-50 trained and evaluated per (backend, dataset, init, repeat).
TRAINING = config["study_a"]["training"]


def training_parts(kind):
    return expand(
        "results/study_a/train/{backend}/{dataset}/{init}/seed{seed}.{kind}.parquet",
        backend=TRAINING["backends"], dataset=TRAINING["datasets"], init=TRAINING["inits"],
        seed=seeds(TRAINING), kind=kind,
    )


rule train_eager:
    input:
        data="results/data/prepared/{dataset}",
        weights="results/data/init/{dataset}/{init}-seed{seed}.weights",
        order=f"results/data/order/{{dataset}}/seed{{seed}}-epochs{TRAINING['epochs']}.i32",
    output:
        table="results/study_a/train/eager/{dataset}/{init}/seed{seed}.rows.parquet",
        env="results/study_a/train/eager/{dataset}/{init}/seed{seed}.env.parquet",
    log:
        "logs/study_a/train-eager-{dataset}-{init}-{seed}.log",
    resources:
        **timing_job("train_eager"),
    script:
        "../../scripts/train_eager.py"


rule concat_training:
    input:
        tables=training_parts("rows"),
        envs=training_parts("env"),
    output:
        table="results/study_a/training.parquet",
        env=env_sidecar("results/study_a/training.parquet"),
    log:
        "logs/study_a/concat-training.log",
    params:
        table="training",
    script:
        "../../scripts/concat_table.py"


TABLES["training"] = "results/study_a/training.parquet"
