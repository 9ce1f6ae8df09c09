"""Rule report_bundle: the report's charts' JavaScript (vega, vega-lite, vega-embed), built at the run's start so
that the report, the last job of every run, does not build it."""
from abstraction_cost.report import page
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
page.write_bundle(snakemake.output[0])
log.info("wrote the charts' JavaScript to %s", snakemake.output[0])
