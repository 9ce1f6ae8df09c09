"""Study A training's summaries (rule summarise_training): the curve and summary tables from rows of table
training. Kept apart from the report's figures so that the rule needs no plotting package.

Time per sample, first epoch apart from the steady ones (epoch >= 1): each repeat of a training is an invocation of
its own (a fresh process), so the estimate is the median over repeats of each repeat's median and its 95% interval
measure/statistics.hierarchical_interval's (repeats, then epochs within each; with two repeats or more widened to
the t-interval of the repeats' medians). A first epoch is one value per repeat, so its interval rests on the
repeats alone: null with one repeat. A steady interval of one repeat describes that process only."""
from __future__ import annotations

import polars as pl

from ... import tables
from ...measure.statistics import hierarchical_interval

KEYS = ["backend", "dataset", "init"]


def _run_ids(column: str = "run_id") -> pl.Expr:
    return pl.col(column).unique().sort().str.join(",").alias("run_id")


def _ok(training: pl.DataFrame) -> pl.DataFrame:
    return training.filter((pl.col("status") == "ok") & pl.col("epoch").is_not_null()
                           & pl.col("phase").is_not_null())


def training_curve(training: pl.DataFrame) -> pl.DataFrame:
    """Rows of table training_curve from rows of table training."""
    ok = _ok(training)
    epoch_time = (ok.filter(pl.col("phase") == "train").group_by(KEYS)
                  .agg(pl.col("time_s").mean().alias("epoch_time_s_mean")))
    curve = (ok.filter(pl.col("phase") == "eval").group_by([*KEYS, "epoch"])
             .agg(_run_ids(), pl.col("repeat").n_unique().cast(pl.Int64).alias("repeats"),
                  pl.col("accuracy").mean().alias("accuracy_mean"),
                  pl.col("accuracy").min().alias("accuracy_min"),
                  pl.col("accuracy").max().alias("accuracy_max"),
                  pl.col("loss").mean().alias("loss_mean"))
             .join(epoch_time, on=KEYS, how="left")
             .with_columns(((pl.col("epoch") + 1) * pl.col("epoch_time_s_mean")).alias("time_s"))
             .sort([*KEYS, "epoch"]))
    return tables.frame("training_curve", curve.select(list(tables.schema("training_curve"))))


def training_summary(training: pl.DataFrame) -> pl.DataFrame:
    """Rows of table training_summary from rows of table training: one per (backend, dataset, init)."""
    ok = _ok(training)
    eval_rows = ok.filter(pl.col("phase") == "eval")
    train_rows = ok.filter(pl.col("phase") == "train")
    last = eval_rows.group_by(KEYS).agg(pl.col("epoch").max().alias("last_epoch"))
    final = (eval_rows.join(last, on=KEYS).filter(pl.col("epoch") == pl.col("last_epoch"))
             .group_by(KEYS).agg((pl.col("last_epoch").first() + 1).alias("epochs"),
                                 pl.col("accuracy").mean().alias("final_accuracy_mean"),
                                 pl.col("accuracy").min().alias("final_accuracy_min"),
                                 pl.col("accuracy").max().alias("final_accuracy_max"),
                                 pl.col("loss").mean().alias("final_loss_mean")))
    train = train_rows.group_by(KEYS).agg(
        pl.col("time_s").mean().alias("epoch_time_s_mean"),
        pl.col("gpu_util_mean_pct").mean().alias("gpu_util_train_mean_pct"))
    times = epoch_times(train_rows, "train").join(epoch_times(eval_rows, "eval"), on=KEYS, how="full", coalesce=True)
    peaks = ok.group_by(KEYS).agg(pl.col("mem_used_mib_max").max(),
                                  pl.col("alloc_peak_mib").max().alias("alloc_peak_mib_max"))
    status = pl.col("status").fill_null("")
    summary = training.group_by(KEYS).agg(
        _run_ids(), *(pl.col("repeat").filter(kind).n_unique().cast(pl.Int64).alias(column)
                      for column, kind in (("repeats_ok", status == "ok"), ("repeats_not_run", status == "not_run"),
                                           ("repeats_missing", status == "missing"),
                                           ("repeats_failed", ~status.is_in(["ok", "not_run", "missing"])))))
    for part in (final, train, times, peaks):
        summary = summary.join(part, on=KEYS, how="left")
    summary = summary.sort(KEYS)
    return tables.frame("training_summary", summary.select(list(tables.schema("training_summary"))))


def _interval(groups: list[list[float]], least: int) -> tuple[float | None, float | None, float | None]:
    """(estimate, low, high) over the repeats' groups; no interval with fewer than `least` repeats."""
    groups = [g for g in groups if g]
    if not groups:
        return None, None, None
    i = hierarchical_interval(groups)
    if len(groups) < least:
        return i.estimate, None, None
    return i.estimate, i.low, i.high


def epoch_times(rows: pl.DataFrame, phase: str) -> pl.DataFrame:
    """<phase>_time_per_sample_ms_{first,steady} with _low/_high and <phase>_time_repeats per (KEYS): the module's
    docstring says how."""
    columns = [f"{phase}_time_per_sample_ms_{part}{end}" for part in ("first", "steady") for end in ("", "_low",
                                                                                                      "_high")]
    out = []
    for keys, part in rows.group_by(KEYS, maintain_order=True):
        repeats = part.sort("repeat", "epoch").partition_by("repeat", maintain_order=True)
        first = [r.filter(pl.col("epoch") == 0)["time_per_sample_ms"].drop_nulls().to_list() for r in repeats]
        steady = [r.filter(pl.col("epoch") > 0)["time_per_sample_ms"].drop_nulls().to_list() for r in repeats]
        values = (*_interval(first, 2), *_interval(steady, 1))
        out.append({**dict(zip(KEYS, keys)), **dict(zip(columns, values)),
                    f"{phase}_time_repeats": sum(1 for g in steady if g) or sum(1 for g in first if g)})
    schema = {**{k: pl.String for k in KEYS}, **{c: pl.Float64 for c in columns}, f"{phase}_time_repeats": pl.Int64}
    return pl.DataFrame(out, schema=schema)
