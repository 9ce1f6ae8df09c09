# Study A: ResNet-50 trained and evaluated per (backend, dataset, init, repeat).


localrules: concat_training  # seconds: run where Snakemake runs, not as cluster jobs


rule train_eager:
    input:
        data=PREPARED,
        weights=INIT_WEIGHTS,
        order=TRAINING_ORDER,
    output:
        table="results/study_a/train/eager/{dataset}/{init}/seed{seed}.rows.parquet",
        env="results/study_a/train/eager/{dataset}/{init}/seed{seed}.env.parquet",
    log:
        "logs/study_a/train-eager-{dataset}-{init}-{seed}.log",
    params:
        config=reads(*MEASURED, "study_a.training", but=("study_a.training.backends", "study_a.training.datasets", "study_a.training.inits", "study_a.training.repeats")),
    threads: timing_threads("train_eager")
    resources:
        **timing_job("train_eager"),
    script:
        "../../scripts/train_eager.py"


rule concat_training:
    input:
        tables=training_parts("rows"),
        envs=training_parts("env"),
    output:
        table=TABLES["training"],
        env=env_sidecar(TABLES["training"]),
    log:
        "logs/study_a/concat-training.log",
    params:
        table="training",
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/concat_table.py"
