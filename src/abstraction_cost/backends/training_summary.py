"""Study A training's summaries (rule summarise_training): the curve and summary tables from rows of table
training. Kept apart from the report's figures so that the rule needs no plotting package."""
from __future__ import annotations

import polars as pl

from .. import tables

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
    first, steady = pl.col("epoch") == 0, pl.col("epoch") > 0
    train = train_rows.group_by(KEYS).agg(
        pl.col("time_per_sample_ms").filter(first).median().alias("train_time_per_sample_ms_first"),
        pl.col("time_per_sample_ms").filter(steady).median().alias("train_time_per_sample_ms_steady"),
        pl.col("time_s").mean().alias("epoch_time_s_mean"),
        pl.col("gpu_util_mean_pct").mean().alias("gpu_util_train_mean_pct"))
    evals = eval_rows.group_by(KEYS).agg(
        pl.col("time_per_sample_ms").filter(first).median().alias("eval_time_per_sample_ms_first"),
        pl.col("time_per_sample_ms").filter(steady).median().alias("eval_time_per_sample_ms_steady"))
    peaks = ok.group_by(KEYS).agg(pl.col("mem_used_mib_max").max(),
                                  pl.col("alloc_peak_mib").max().alias("alloc_peak_mib_max"))
    status = pl.col("status").fill_null("")
    summary = training.group_by(KEYS).agg(
        _run_ids(), *(pl.col("repeat").filter(kind).n_unique().cast(pl.Int64).alias(column)
                      for column, kind in (("repeats_ok", status == "ok"), ("repeats_not_run", status == "not_run"),
                                           ("repeats_missing", status == "missing"),
                                           ("repeats_failed", ~status.is_in(["ok", "not_run", "missing"])))))
    for part in (final, train, evals, peaks):
        summary = summary.join(part, on=KEYS, how="left")
    summary = summary.sort(KEYS)
    return tables.frame("training_summary", summary.select(list(tables.schema("training_summary"))))
