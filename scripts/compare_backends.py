"""Rule compare_backends: time per sample, speedup over eager, memory and parity errors per implementation."""
from abstraction_cost import tables
from abstraction_cost.study_a.comparison import compare as comparison
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
evals = tables.read("backend_eval", snakemake.input.table)
# expand() order: numerics outer, implementations inner
names = [(n, i) for n in snakemake.params.numerics for i in snakemake.params.implementations]
logits: dict[str, dict[str, str]] = {}
for (numerics, name), path in zip(names, snakemake.input.logits, strict=True):
    logits.setdefault(numerics, {})[name] = path
rows = comparison.compare_numerics(evals, logits, snakemake.params.tolerance, snakemake.config["seed"])
df = tables.write("backend_comparison", rows, snakemake.output.table)
# the environment of the jobs these numbers come from, so that the report's environment table covers them
tables.concat("environment", [snakemake.input.env], snakemake.output.env)
for row in df.iter_rows(named=True):
    log.info("%-13s %-20s %-12s %s ms/sample, max |Δlogit| %s", row["numerics"], row["implementation"], row["status"],
             row["time_per_sample_ms"], row["max_abs_logit_diff"])
