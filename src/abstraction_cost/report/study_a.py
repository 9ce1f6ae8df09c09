"""Study A training: the figure of the curve table (backends.training_summary computes the tables).

The figure is the counterpart of the study's Fig. 4, 7 and 15: eval accuracy against time, where time is
(epoch + 1) × mean epoch time (the study's "epoch × average epoch time"; epochs are 0-based in the tables and
evaluation follows each epoch's training), one panel per dataset, a line per backend (and a dash per init
scheme when there are several), the mean over repeats with a min-max band.
"""
from __future__ import annotations

import altair as alt
import polars as pl

from ..study_a.training.summary import KEYS


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


REPEAT_COUNTS = {"repeats_ok": "ok", "repeats_not_run": "not_run", "repeats_missing": "missing",
                 "repeats_failed": "failed"}


def repeats_text(*counts: int) -> str:
    """'2 ok', '0 ok, 3 not_run', '1 ok, 1 failed': ok always, each other status where it has repeats."""
    parts = [f"{n} {label}" for n, label in zip(counts, REPEAT_COUNTS.values())]
    return ", ".join(parts[:1] + [p for n, p in zip(counts[1:], parts[1:]) if n])


def summary_display(summary: pl.DataFrame) -> pl.DataFrame:
    """training_summary with readable column names, the final accuracy as 'mean [min–max]'."""
    accuracy = [_accuracy(*r) for r in summary.select(
        "final_accuracy_min", "final_accuracy_mean", "final_accuracy_max").iter_rows()]
    return summary.select(
        pl.col("backend"), pl.col("dataset"), pl.col("init"),
        pl.Series("repeats", [repeats_text(*r) for r in summary.select(*REPEAT_COUNTS).iter_rows()],
                  dtype=pl.String),
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


def _accuracy_range(summary: pl.DataFrame, backend: str, dataset: str, init: str) -> dict | None:
    rows = summary.filter((pl.col("backend") == backend) & (pl.col("dataset") == dataset) & (pl.col("init") == init)
                          & pl.col("final_accuracy_mean").is_not_null())
    return rows.row(0, named=True) if rows.height else None


def _apart(first: dict, second: dict) -> int:
    """+1: first's final accuracies all above second's; -1: all below; 0: the ranges overlap, or either backend has
    one repeat (no spread to judge a difference against)."""
    if min(first["repeats_ok"], second["repeats_ok"]) < 2:
        return 0
    if first["final_accuracy_min"] > second["final_accuracy_max"]:
        return 1
    return -1 if first["final_accuracy_max"] < second["final_accuracy_min"] else 0


def accuracy_finding(summary: pl.DataFrame) -> str:
    """The study's accuracy findings, per (dataset, init), from the summary table's final accuracies over repeats:
    LibTorch ≈ PyTorch (holds where their ranges overlap, does not hold where they are apart), and cuDNN lagging
    PyTorch (holds where its range lies below eager's, does not hold where above). A backend with one repeat has no
    spread to judge against: no measurable difference at this precision."""
    from . import verdicts

    same, lags, parts = [], [], []
    for (dataset, init), _ in sorted(summary.group_by("dataset", "init"), key=lambda g: str(g[0])):
        eager = _accuracy_range(summary, "eager", dataset, init)
        if eager is None:
            continue
        for backend, claims in (("libtorch", same), ("cudnn", lags)):
            other = _accuracy_range(summary, backend, dataset, init)
            if other is None:
                continue
            side = _apart(other, eager)
            if backend == "libtorch":
                claims.append(verdicts.NO_DIFFERENCE if min(other["repeats_ok"], eager["repeats_ok"]) < 2
                              else verdicts.HOLDS if side == 0 else verdicts.DOES_NOT_HOLD)
            else:
                claims.append(verdicts.HOLDS if side < 0 else verdicts.DOES_NOT_HOLD if side > 0
                              else verdicts.NO_DIFFERENCE)
            parts.append(f"{dataset} ({init}): {backend} {other['final_accuracy_mean']:.3f} against eager "
                         f"{eager['final_accuracy_mean']:.3f}")
    if not parts:
        return "Not measured here: no dataset has eager's accuracy beside libtorch's or cudnn's."
    text = f"Final eval accuracy, mean over repeats: {'; '.join(parts)}."
    if same:
        text += (f" The study's LibTorch ≈ PyTorch (their ranges over repeats overlap): {verdicts.combine(same)}.")
    if lags:
        text += (f" Its cuDNN lagging PyTorch (cuDNN's range below eager's): {verdicts.combine(lags)}.")
    return text
