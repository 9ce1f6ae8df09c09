"""After how many calls a build pays for itself (table compile_breakeven): the build's one-off cost over what each
call saves against eager, build_ms / (eager_ms − time_ms), with the range the speedup's interval gives
(saving = eager_ms × (1 − 1 / speedup)). A build whose speedup's interval reaches 1 is not measurably faster, so
it may never pay for itself: its break-even is null and its message says so.

Build costs, by source: the backend comparison's prepare_s (TorchScript's scripting, export + AOTInductor's
compile); the sweep's build_s (a per-shape build's first call at the shape; a dynamic build's compile, at every
shape; the AOTInductor package's build); Study B's first call minus one steady call (compilation; the first call
also runs once)."""
from __future__ import annotations

import polars as pl

from .. import tables
from .common import ok

NOT_FASTER = "not measurably faster than eager (the speedup's interval reaches 1): may never pay for itself"
SLOWER = "measurably slower than eager (the speedup's interval lies below 1): never pays for itself"


def _calls(build_s, eager_ms, speedup) -> float | None:
    if None in (build_s, eager_ms, speedup) or speedup <= 1:
        return None
    return build_s * 1000 / (eager_ms * (1 - 1 / speedup))


def _row(run_id, experiment, implementation, case, numerics, batch, resolution, build_s, source, eager_ms, time_ms,
         speedup, low, high) -> dict:
    measured = low is not None and low > 1
    return {"run_id": run_id, "experiment": experiment, "implementation": implementation, "case": case,
            "numerics": numerics, "batch_size": batch, "resolution": resolution, "build_s": build_s,
            "build_source": source, "eager_ms": eager_ms, "time_ms": time_ms, "speedup": speedup,
            "speedup_low": low, "speedup_high": high,
            "breakeven_calls": _calls(build_s, eager_ms, speedup) if measured else None,
            "breakeven_calls_low": _calls(build_s, eager_ms, high) if measured else None,
            "breakeven_calls_high": _calls(build_s, eager_ms, low) if measured else None,
            "status": "ok",
            "message": None if measured else SLOWER if high is not None and high < 1 else NOT_FASTER}


def from_comparison(comparison: pl.DataFrame) -> list[dict]:
    rows = ok(comparison, "time_per_sample_ms")
    eager = rows.filter(pl.col("implementation") == "eager").select(
        "numerics", (pl.col("time_per_sample_ms") * pl.col("batch_size")).alias("eager_ms"))
    built = rows.filter((pl.col("implementation") != "eager") & pl.col("prepare_s").is_not_null()).join(
        eager, on="numerics")
    return [_row(r["run_id"], "backend_comparison", r["implementation"], f"batch {r['batch_size']}, "
                 f"{r['resolution']} px", r["numerics"], r["batch_size"], r["resolution"], r["prepare_s"],
                 "prepare_s", r["eager_ms"], r["time_per_sample_ms"] * r["batch_size"], r["speedup_vs_eager"],
                 r["speedup_vs_eager_low"], r["speedup_vs_eager_high"]) for r in built.iter_rows(named=True)]


def from_sweep(sweep: pl.DataFrame) -> list[dict]:
    """Per cell of a build with a build_s: the cost of having the build at the cell's shape against the saving per
    call at that cell. A per-shape build costs what meeting the shape cost (recorded on the shape's first row); a
    dynamic build is one build for every shape, so at each it costs its compile, the most any of its shapes
    recorded (its first shape's compile; a later shape records only a recompile or guards; the AOTInductor
    package's build is on every row)."""
    shape = ["numerics", "implementation", "batch_size", "resolution"]
    costs = (sweep.filter(pl.col("build_s").is_not_null()).group_by(shape)
             .agg(pl.col("build_s").max().alias("cost"), pl.col("build").first())
             .with_columns(cost=pl.when(pl.col("build") == "dynamic")
                           .then(pl.col("cost").max().over("numerics", "implementation"))
                           .otherwise(pl.col("cost"))))
    rows = ok(sweep, "time_ms").join(costs, on=shape)
    eager = ok(sweep, "time_ms").filter(pl.col("implementation") == "eager").select(
        "numerics", "transfer", "batch_size", "resolution", pl.col("time_ms").alias("eager_ms"),
        pl.col("time_ms_low").alias("eager_low"), pl.col("time_ms_high").alias("eager_high"))
    rows = rows.join(eager, on=["numerics", "transfer", "batch_size", "resolution"])
    out = []
    for r in rows.iter_rows(named=True):
        have = None not in (r["eager_low"], r["eager_high"], r["time_ms_low"], r["time_ms_high"])
        case = f"batch {r['batch_size']}, {r['resolution']} px, {r['transfer']}, build {r['build']}"
        out.append(_row(r["run_id"], "sweep", r["implementation"], case,
                        r["numerics"], r["batch_size"], r["resolution"], r["cost"], "build_s", r["eager_ms"],
                        r["time_ms"], r["eager_ms"] / r["time_ms"],
                        r["eager_low"] / r["time_ms_high"] if have else None,
                        r["eager_high"] / r["time_ms_low"] if have else None))
    return out


def from_vision(speedups: pl.DataFrame, builds: pl.DataFrame) -> list[dict]:
    keys = ["model", "pair", "mode", "batch_size", "resolution", "numerics", "memory_format", "variant"]
    first = builds.filter((pl.col("step") == "e2e") & pl.col("first_call_ms").is_not_null()).select(
        *keys, "first_call_ms")
    rows = ok(speedups, "time_ms").filter(pl.col("variant") == "compiled").join(first, on=keys)
    return [_row(r["run_id"], "vision_speedups", f"{r['model']} compiled", f"{r['pair']}, {r['mode']}, "
                 f"{r['memory_format']}", r["numerics"], r["batch_size"], r["resolution"],
                 max(r["first_call_ms"] - r["time_ms"], 0) / 1000, "first_call_ms − time_ms", r["eager_ms"],
                 r["time_ms"], r["speedup"], r["speedup_low"], r["speedup_high"]) for r in rows.iter_rows(named=True)]


def from_blocks(name: str, speedups: pl.DataFrame, case: pl.Expr) -> list[dict]:
    rows = ok(speedups, "compiled_median_ms").filter(pl.col("compiled_first_call_ms").is_not_null()).with_columns(
        case.alias("case"))
    return [_row(r["run_id"], name, f"{r['compiled_configuration']} ({r['mode']})", f"{r['pair']}, {r['case']}",
                 None, None, None, max(r["compiled_first_call_ms"] - r["compiled_median_ms"], 0) / 1000,
                 "compiled_first_call_ms − compiled_median_ms", r["eager_median_ms"], r["compiled_median_ms"],
                 r["speedup"], r["speedup_low"], r["speedup_high"]) for r in rows.iter_rows(named=True)]


BLOCK_CASES = {
    "study_b_matmul_speedups": pl.format("n={}", "n"),
    "study_b_conv_ablation_speedups": pl.format("kernel {} stride {} padding {}", "kernel", "stride", "padding"),
    "study_b_conv_blocks_speedups": pl.format("N={}", "n"),
}


def breakeven_rows(frames: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Table compile_breakeven from the tables by name (a missing one is an empty frame)."""
    def table(name):
        return frames.get(name, pl.DataFrame(schema=tables.schema(name)))

    rows = [*from_comparison(table("backend_comparison")), *from_sweep(table("sweep")),
            *from_vision(table("vision_speedups"), table("vision_builds"))]
    for name, case in BLOCK_CASES.items():
        rows += from_blocks(name, table(name), case)
    return tables.frame("compile_breakeven", rows)
