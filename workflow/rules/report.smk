# The report: the environment of every measuring job, the tables the report derives, and results/report.html.
# Every table it reads is named in common.smk (TABLES, SUMMARIES, REPORT_TABLES).

localrules: environment, summarise_training, report_bundle, report  # seconds: run where Snakemake runs


rule environment:
    input:
        [env_sidecar(path) for path in TABLES.values()],
    output:
        ENVIRONMENT,
    log:
        "logs/report/environment.log",
    priority: SUMMARY_PRIORITY
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
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/summarise_training.py"


# The charts' JavaScript (1-2 s of vl-convert), built as the run starts rather than inside the report, which every
# run waits for last; the report builds it itself where this file was built by another vl-convert (page._bundle).
rule report_bundle:
    output:
        "results/report_bundle.json",
    log:
        "logs/report/bundle.log",
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/report_bundle.py"


rule report:
    input:
        qmd=f"{workflow.basedir}/report/report.qmd",
        bundle=rules.report_bundle.output[0],
        partials=sorted(Path(workflow.basedir, "report").glob("_*.qmd")),
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
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/render_report.py"
