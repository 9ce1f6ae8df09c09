"""Rule report: render report/report.qmd, reading the tables named in params.tables, into one HTML file."""
from abstraction_cost.report import render
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
used = render.render(snakemake.input.qmd, snakemake.output[0], snakemake.params.tables,
                     renderer=snakemake.params.renderer, datasets=snakemake.params.datasets,
                     bundle=snakemake.input.bundle)
log.info("report rendered by %s from %d tables", used, len(snakemake.params.tables))
