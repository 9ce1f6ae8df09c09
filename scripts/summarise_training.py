"""Rule summarise_training: Study A's training curve (the figure's data) and summary, from the training table."""
from abstraction_cost import tables
from abstraction_cost.study_a.training import summary as training_summary
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
training = tables.read("training", snakemake.input.training)
curve = tables.write("training_curve", training_summary.training_curve(training), snakemake.output.curve)
summary = tables.write("training_summary", training_summary.training_summary(training), snakemake.output.summary)
log.info("training: %d rows -> %d curve points, %d summary rows", training.height, curve.height, summary.height)
