"""Study A's training: the eager training job's rows (job) and the training curve and summary tables (summary)."""
