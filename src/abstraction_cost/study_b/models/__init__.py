"""Study B's vision models: the models and variants, layer times, oracles, selective compilation, timing methods,
the vision job, its protocol and workers, and its summaries."""
