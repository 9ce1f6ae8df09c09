"""Rules study_b_block_speedups and study_b_resnet50_conv_speedups: medians and bootstrap speedup intervals."""
from abstraction_cost import tables
from abstraction_cost.study_b.blocks.registry import experiment
from abstraction_cost.study_b.blocks.speedups import Bootstrap, resnet_conv_speedups, speedups
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
bootstrap = Bootstrap.from_config(snakemake.config)
name = snakemake.params.experiment
if name == "resnet50_convs":
    isolated = tables.read("study_b_resnet50_convs", snakemake.input.isolated)
    in_model = tables.read("study_b_resnet50_in_model", snakemake.input.in_model)
    rows = resnet_conv_speedups(isolated, in_model, bootstrap)
    table = "study_b_resnet50_conv_speedups"
else:
    exp = experiment(name)
    rows = speedups(name, tables.read(exp.table, snakemake.input.table), bootstrap)
    table = exp.speedup_table
df = tables.write(table, rows, snakemake.output.table)
# the environment of the jobs these numbers come from, so that the report's environment table covers them
tables.concat("environment", snakemake.input.envs, snakemake.output.env)
log.info("%s: %d rows", table, df.height)
