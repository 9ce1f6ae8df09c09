# The report: the environment of every measuring job, the tables the report derives, and results/report.html.
# Included last in the Snakefile, so that every rules file has registered its tables in TABLES by now.
import glob

ENVIRONMENT = "results/environment.parquet"

# Tables computed from measured tables for the report (no measuring job of their own, so no env sidecar).
SUMMARIES = {
    "training_curve": "results/study_a/training_curve.parquet",
    "training_summary": "results/study_a/training_summary.parquet",
    **SWEEP_SUMMARIES,
    **DERIVED,
}

# Every table the report reads, by table name: passed to it as JSON (report/page.py), named only here.
REPORT_TABLES = {**TABLES, **SUMMARIES, "environment": ENVIRONMENT}
# Every prepared dataset the run reads (training's, and the sweep's images): the report lists failed downloads.
REPORT_DATASETS = {name: f"{PREPARED_DIR}/{name}"
                   for name in sorted({*config["study_a"]["training"]["datasets"], BACKENDS["dataset"]})}


rule environment:
    input:
        [env_sidecar(path) for path in TABLES.values()],
    output:
        ENVIRONMENT,
    log:
        "logs/report/environment.log",
    script:
        "../../scripts/concat_environment.py"


rule summarise_training:
    input:
        training=TABLES["training"],
    output:
        curve=SUMMARIES["training_curve"],
        summary=SUMMARIES["training_summary"],
    log:
        "logs/report/summarise-training.log",
    script:
        "../../scripts/summarise_training.py"


rule report:
    input:
        qmd=f"{workflow.basedir}/report/report.qmd",
        partials=sorted(glob.glob(f"{workflow.basedir}/report/_*.qmd")),
        tables=list(REPORT_TABLES.values()),
        datasets=list(REPORT_DATASETS.values()),
    output:
        "results/report.html",
    log:
        "logs/report/report.log",
    params:
        tables=REPORT_TABLES,
        datasets=REPORT_DATASETS,
        renderer=config["report"]["renderer"],
    script:
        "../../scripts/render_report.py"
