"""Rule compare_backends: time per sample, speedup over eager, memory and parity errors per implementation."""
from abstraction_cost import tables
from abstraction_cost.backends import comparison
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
evals = tables.read("backend_eval", snakemake.input.table)
logits = dict(zip(snakemake.params.implementations, snakemake.input.logits))
rows = comparison.compare(evals, logits, snakemake.params.tolerance, snakemake.config["seed"])
df = tables.write("backend_comparison", rows, snakemake.output.table)
# the environment of the jobs these numbers come from, so that the report's environment table covers them
tables.concat("environment", [snakemake.input.env], snakemake.output.env)
for row in df.iter_rows(named=True):
    log.info("%-20s %-8s %s ms/sample, max |Δlogit| %s", row["implementation"], row["status"],
             row["time_per_sample_ms"], row["max_abs_logit_diff"])
