"""Study A training: the figure of the curve table (backends.training_summary computes the tables).

The figure is the counterpart of the study's Fig. 4, 7 and 15: eval accuracy against time, where time is
(epoch + 1) × mean epoch time (the study's "epoch × average epoch time"; epochs are 0-based in the tables and
evaluation follows each epoch's training), one panel per dataset, a line per backend (and a dash per init
scheme when there are several), the mean over repeats with a min-max band.
"""
from __future__ import annotations

import altair as alt
import polars as pl

from ..backends.training_summary import KEYS


def training_figure(curve: pl.DataFrame, width: int = 260, height: int = 200) -> alt.FacetChart | None:
    """Accuracy against time, a panel per dataset, a line per backend (dash per init if several); None if empty."""
    if curve.is_empty():
        return None
    several_inits = curve["init"].n_unique() > 1
    data = curve.select([*KEYS, "epoch", "repeats", "time_s", "accuracy_mean", "accuracy_min", "accuracy_max"])
    x = alt.X("time_s:Q", title="time (s) = epochs × mean epoch time", scale=alt.Scale(zero=True))
    colour = alt.Color("backend:N", title="backend")
    dash = alt.StrokeDash("init:N", title="init") if several_inits else alt.Undefined
    detail = alt.Detail("init:N")
    tooltip = [alt.Tooltip(c) for c in [*KEYS, "epoch", "repeats", "time_s", "accuracy_mean", "accuracy_min",
                                        "accuracy_max"]]
    band = alt.Chart().mark_area(opacity=0.2).encode(
        x=x, y=alt.Y("accuracy_min:Q", title="eval accuracy", scale=alt.Scale(domain=[0, 1])),
        y2="accuracy_max:Q", color=alt.Color("backend:N", legend=None), detail=detail)
    line = alt.Chart().mark_line(point=True).encode(
        x=x, y="accuracy_mean:Q", color=colour, strokeDash=dash, detail=detail, tooltip=tooltip)
    return (alt.layer(band, line, data=data).properties(width=width, height=height)
            .facet(column=alt.Column("dataset:N", title=None))
            .resolve_scale(x="independent"))


def _accuracy(row_min, row_mean, row_max) -> str | None:
    if row_mean is None:
        return None
    if row_min == row_max:
        return f"{row_mean:.3f}"
    return f"{row_mean:.3f} [{row_min:.3f}–{row_max:.3f}]"


def summary_display(summary: pl.DataFrame) -> pl.DataFrame:
    """training_summary with readable column names, the final accuracy as 'mean [min–max]'."""
    accuracy = [_accuracy(*r) for r in summary.select(
        "final_accuracy_min", "final_accuracy_mean", "final_accuracy_max").iter_rows()]
    return summary.select(
        pl.col("backend"), pl.col("dataset"), pl.col("init"),
        pl.format("{} ok / {} failed", "repeats_ok", "repeats_failed").alias("repeats"),
        pl.col("epochs"),
        pl.Series("final eval accuracy", accuracy, dtype=pl.String),
        pl.col("train_time_per_sample_ms_first").alias("train ms/sample, first epoch"),
        pl.col("train_time_per_sample_ms_steady").alias("train ms/sample, steady"),
        pl.col("eval_time_per_sample_ms_first").alias("eval ms/sample, first epoch"),
        pl.col("eval_time_per_sample_ms_steady").alias("eval ms/sample, steady"),
        pl.col("epoch_time_s_mean").alias("epoch time (s)"),
        pl.col("mem_used_mib_max").alias("device memory (MiB, NVML)"),
        pl.col("alloc_peak_mib_max").alias("allocator peak (MiB)"),
        pl.col("gpu_util_train_mean_pct").alias("GPU util. train (%)"),
    )


SUMMARY_FORMATS = {
    "train ms/sample, first epoch": "{:.3f}", "train ms/sample, steady": "{:.3f}",
    "eval ms/sample, first epoch": "{:.3f}", "eval ms/sample, steady": "{:.3f}", "epoch time (s)": "{:.2f}",
    "device memory (MiB, NVML)": "{:.0f}", "allocator peak (MiB)": "{:.0f}", "GPU util. train (%)": "{:.0f}",
}
