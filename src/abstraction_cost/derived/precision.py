"""How precise each experiment's numbers are (table precision): per experiment and quantity, the relative width of
its 95% intervals, how many ratios' intervals hold 1, the calls and process invocations behind each row, and one
spread measure of the experiment's own.

An interval's relative width is (high − low) / value. Counts are read from the columns the tables carry
(warmup_calls, repeats or samples, invocations); a table without an invocations column was measured in one process
per row, so its intervals describe that process only and the row says "1"."""
from __future__ import annotations

import polars as pl

from .. import tables
from .common import ok, span

# (experiment, quantity, is a ratio, timed-count column, warm-up column)
QUANTITIES = [
    ("sweep", "time_per_sample_ms", False, "repeats", "warmup_calls"),
    ("sweep_speedups", "speedup", True, "paired_turns", None),
    ("backend_comparison", "time_per_sample_ms", False, "repeats", "warmup_calls"),
    ("backend_comparison", "speedup_vs_eager", True, "repeats", None),
    ("vision_speedups", "speedup", True, "samples", None),
    ("vision_selective_summary", "speedup", True, "samples", None),
    ("vision_layer_summary", "speedup", True, None, None),
    ("vision_eager_baselines", "ratio_to_e2e", True, "samples", None),
    ("study_b_matmul_speedups", "speedup", True, "eager_samples", None),
    ("study_b_conv_ablation_speedups", "speedup", True, "eager_samples", None),
    ("study_b_conv_blocks_speedups", "speedup", True, "eager_samples", None),
]


def _bounds(quantity: str) -> tuple[str, str]:
    return f"{quantity}_low", f"{quantity}_high"


def summarise(experiment: str, df: pl.DataFrame, quantity: str, ratio: bool, count: str | None,
              warmup: str | None, spread: tuple[float | None, str], invocations: str | None = None) -> dict:
    """One row of table precision from one table's ok rows."""
    rows = ok(df, quantity) if quantity in df.columns else df.clear()
    low, high = _bounds(quantity)
    with_interval = rows.filter(pl.col(low).is_not_null() & pl.col(high).is_not_null() & (pl.col(quantity) != 0))
    width = (with_interval[high] - with_interval[low]) / with_interval[quantity].abs()
    includes = (with_interval.filter((pl.col(low) <= 1) & (pl.col(high) >= 1)).height if ratio else None)
    # no invocations counted (no column, or null on every row): one process per row
    invocations = invocations or (span(rows["invocations"]) if "invocations" in rows.columns else None) or "1"
    return {"run_id": ",".join(sorted({i for cell in rows["run_id"].drop_nulls() for i in cell.split(",")})),
            "experiment": experiment, "quantity": quantity, "rows": rows.height,
            "rows_with_interval": with_interval.height,
            "rel_width_median": width.median() if width.len() else None,
            "rel_width_p90": width.quantile(0.9, "nearest") if width.len() else None,
            "rel_width_max": width.max() if width.len() else None, "includes_one": includes,
            "warmup_calls": span(rows[warmup]) if warmup and warmup in rows.columns else None,
            "timed_calls": span(rows[count]) if count and count in rows.columns else None,
            "invocations": invocations, "spread": spread[0], "spread_measure": spread[1]}


def invocation_spread(sweep: pl.DataFrame) -> tuple[float | None, str]:
    """Study A's sweep: the largest slowest-over-fastest invocation median of a cell, less 1 (where counted)."""
    if "invocation_spread" not in sweep.columns or ok(sweep, "invocation_spread").is_empty():
        return None, "between-invocation spread not recorded: one process per row"
    return float(ok(sweep, "invocation_spread")["invocation_spread"].max() - 1), (
        "largest (slowest invocation's median / the fastest's) − 1 of a cell")


def eager_baseline_spread(baselines: pl.DataFrame) -> tuple[float | None, str]:
    """Study B: the largest departure from 1 of a step's eager time over the e2e step's, in one job (eager in a
    compiled process is the drift finding, not a step's baseline)."""
    rows = ok(baselines, "ratio_to_e2e")
    if "process" in rows.columns:
        rows = rows.filter(pl.col("process") != "compiled")
    if rows.is_empty():
        return None, "no eager baselines measured"
    return float((rows["ratio_to_e2e"] - 1).abs().max()), (
        "largest |ratio − 1| of a step's eager time to the e2e step's eager, within one job")


def drift_spread(per_call: pl.DataFrame, keys: list[str], order: str, value: str) -> tuple[float | None, str]:
    """The largest |later half's median / earlier half's − 1| of the timed calls of one group: drift within a
    process, which its interval does not describe."""
    rows = ok(per_call, value).filter(pl.col(order).is_not_null())
    if rows.is_empty():
        return None, "no timed calls recorded"
    halves = rows.with_columns(
        (pl.col(order).rank("ordinal").over(keys) > pl.len().over(keys) / 2).alias("later"))
    medians = halves.group_by(*keys, "later").agg(pl.col(value).median())
    ratios = medians.pivot(on="later", index=keys, values=value).drop_nulls()
    if ratios.is_empty() or "true" not in ratios.columns:
        return None, "too few timed calls to split in halves"
    drift = (ratios["true"] / ratios["false"] - 1).abs().max()
    return float(drift), "largest |median of the later half of a job's timed calls / the earlier half's − 1|"


def precision_rows(frames: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Table precision from the measured and summary tables by name (a missing one is an empty frame)."""
    def table(name):
        return frames.get(name, pl.DataFrame(schema=tables.schema(name)))

    spreads = {
        "sweep": invocation_spread(table("sweep")),
        "vision_speedups": eager_baseline_spread(table("vision_eager_baselines")),
        "backend_comparison": drift_spread(table("backend_eval"), ["implementation", "numerics"], "repeat",
                                           "time_per_sample_ms"),
    }
    if invocation_spread(table("backend_comparison"))[0] is not None:   # the interleaved protocol's invocations
        spreads["backend_comparison"] = invocation_spread(table("backend_comparison"))
    none = (None, "between-invocation spread not recorded: one process per row")
    sweep = ok(table("sweep"))
    # sweep_speedups pairs the turns of the sweep's invocations: it counts them where the sweep does
    invocations = {"sweep_speedups": span(sweep["invocations"]) if "invocations" in sweep.columns else None}
    rows = [summarise(name, table(name), quantity, ratio, count, warmup, spreads.get(name, none),
                      invocations.get(name)) for name, quantity, ratio, count, warmup in QUANTITIES]
    return tables.frame("precision", [r for r in rows if r["rows"]])   # experiments measured here only
