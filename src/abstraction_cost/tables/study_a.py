"""Study A tables."""
import polars as pl

from .common import PHASE_MEASURES, STATUS
from .study_a_backends import CONV_ALGORITHMS

SCHEMAS = {
    # One row per (backend, dataset, init, repeat, epoch, phase); phase is train or eval.
    "training": {
        "backend": pl.String,
        "dataset": pl.String,
        "init": pl.String,
        "repeat": pl.Int64,
        "seed": pl.Int64,
        "epoch": pl.Int64,
        "phase": pl.String,
        "device": pl.String,
        "batch_size": pl.Int64,
        **STATUS,
        "loss": pl.Float64,
        "accuracy": pl.Float64,
        "samples": pl.Int64,
        "time_s": pl.Float64,               # sum of the phase's timed steps (H2D copy to end of the step)
        "time_per_sample_ms": pl.Float64,
        "wall_s": pl.Float64,               # the phase's wall-clock time, untimed work included
        **PHASE_MEASURES,
        **CONV_ALGORITHMS,                  # backend cudnn only
    },
}
