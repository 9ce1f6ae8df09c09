"""Speedups of compiled over eager from timing tables: ratio of medians with a bootstrap interval per case.

    speedup_rows(timings, keys=["n", "dtype"], bootstrap=Bootstrap(10_000, 0.95, seed=0))

For every (keys, pair, mode) the eager rows (compiled = false) and compiled rows are compared; a group where
either side is not all `ok` gets that side's status and message (error before oom before missing before not_run)
and null numbers, so that the report can say why a speedup is absent. speedups (one experiment's whole timing table to
its speedup table, matmul's with NumPy beside it) and resnet_conv_speedups (the isolated and in-model ResNet-50
tables joined) are the rule scripts'; nothing here imports torch, so that those short jobs do not load it.
"""
from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ...measure import statistics
from ...tables import study_b_blocks as schemas
from ..configurations import PAIRS
from .registry import experiment

STATUS_ORDER = ("wrong_output", "error", "oom", "missing", "not_run")


@dataclass(frozen=True)
class Bootstrap:
    resamples: int
    confidence: float
    seed: int

    @classmethod
    def from_config(cls, config: dict) -> "Bootstrap":
        b = config["study_b"]["blocks"]["bootstrap"]
        return cls(b["resamples"], b["confidence"], config["seed"])


def _side_status(side: pl.DataFrame) -> tuple[str, str | None]:
    if side.height == 0:
        return "missing", "no rows"
    bad = side.filter(pl.col("status") != "ok")
    if bad.height == 0:
        if side["time_ms"].null_count() == side.height:
            return "missing", "no times"
        return "ok", None
    for status in STATUS_ORDER:
        hit = bad.filter(pl.col("status") == status)
        if hit.height:
            return status, hit["message"][0]
    return str(bad["status"][0]), bad["message"][0]


def compare(eager: pl.DataFrame, compiled: pl.DataFrame, bootstrap: Bootstrap) -> dict:
    """Status, medians and speedup of one group (both sides: rows of one timing table)."""
    out = {"status": "ok", "message": None, "eager_samples": eager["time_ms"].drop_nulls().len(),
           "compiled_samples": compiled["time_ms"].drop_nulls().len(), "eager_median_ms": None,
           "compiled_median_ms": None, "speedup": None, "speedup_low": None, "speedup_high": None,
           "speedup_includes_one": None}
    sides = {"eager": _side_status(eager), "compiled": _side_status(compiled)}
    if sides["eager"] == sides["compiled"] and sides["eager"][0] != "ok":   # one reason for the pair
        out.update(status=sides["eager"][0], message=sides["eager"][1])
        return out
    for name, (status, message) in sides.items():
        if status != "ok":
            out.update(status=status, message=f"{name}: {message}")
            return out
    e, c = eager["time_ms"].drop_nulls().to_list(), compiled["time_ms"].drop_nulls().to_list()
    s = statistics.speedup(e, c, resamples=bootstrap.resamples, confidence=bootstrap.confidence,
                           seed=bootstrap.seed)
    out.update(eager_median_ms=statistics.median(e), compiled_median_ms=statistics.median(c), **s.columns())
    return out


def speedup_rows(timings: pl.DataFrame, keys: list[str], bootstrap: Bootstrap) -> list[dict]:
    """One SPEEDUP row (tables.study_b_blocks) per (keys, pair, mode) of a timing table, with its run_id."""
    rows = []
    groups = timings.select([*keys, "pair", "mode"]).unique(maintain_order=True)
    for group in groups.iter_rows(named=True):
        part = timings.filter(*(pl.col(k) == v for k, v in group.items()))
        eager_name, compiled_name = PAIRS[group["pair"]]
        # the pair's own two configurations (a matmul case's numpy rows are compared apart: with_numpy)
        eager = part.filter(~pl.col("compiled") & (pl.col("configuration") == eager_name))
        compiled = part.filter(pl.col("compiled"))
        first = compiled["first_call_ms"].drop_nulls()
        # eager and compiled of one group are timed by one job: its run_id joins the environment
        rows.append({"run_id": part["run_id"][0], **group, "eager_configuration": eager_name, "compiled_configuration": compiled_name,
                     "compiled_first_call_ms": first[0] if first.len() else None,
                     **compare(eager, compiled, bootstrap)})
    return rows


def speedups(name: str, timings: pl.DataFrame, bootstrap: Bootstrap) -> list[dict]:
    exp = experiment(name)
    if exp.speedup_table is None:
        raise ValueError(f"experiment {name!r} has no speedup table of its own; see resnet_conv_speedups")
    rows = speedup_rows(timings, list(exp.keys), bootstrap)
    return with_numpy(rows, timings, bootstrap) if name == "matmul" else rows


def resnet_conv_speedups(isolated: pl.DataFrame, in_model: pl.DataFrame, bootstrap: Bootstrap) -> list[dict]:
    """Per distinct convolution, pair and mode: the isolated speedup beside the in-model (profiler) speedup.

    run_id is the in-model job's; isolated_run_id the isolated job's (null where it was not timed).
    """
    conv_keys = list(schemas.RESNET_CONV_KEYS)
    occurrences = {r["conv_id"]: r["layer"] for r in
                   in_model.group_by("conv_id").agg(pl.col("layer").n_unique()).iter_rows(named=True)}
    groups = in_model.select([*conv_keys, "pair", "mode"]).unique(maintain_order=True)
    rows = []
    for group in groups.iter_rows(named=True):
        row = {**group, "occurrences": occurrences[group["conv_id"]]}
        for prefix, table in (("isolated", isolated), ("in_model", in_model)):
            part = table.filter(*(pl.col(k) == v for k, v in group.items()))
            run_id = part["run_id"][0] if part.height else None
            row["run_id" if prefix == "in_model" else "isolated_run_id"] = run_id
            if part.height == 0:
                cmp = {"status": "not_run", "message": "not timed in isolation: beyond config key "
                       "'study_b.blocks.resnet50_convs.limit'"}
            else:
                cmp = compare(part.filter(~pl.col("compiled")), part.filter(pl.col("compiled")), bootstrap)
            row.update({f"{prefix}_{k}": cmp.get(k) for k in
                        ("status", "message", "eager_median_ms", "compiled_median_ms", "speedup", "speedup_low",
                         "speedup_high", "speedup_includes_one")})
        rows.append(row)
    return rows


NUMPY_COLUMNS = ("numpy_median_ms", "numpy_speedup", "numpy_speedup_low", "numpy_speedup_high")


def with_numpy(rows: list[dict], timings: pl.DataFrame, bootstrap: Bootstrap) -> list[dict]:
    """The matmul speedup rows with NumPy's median and its speedup over eager (eager median / NumPy median: above 1
    = NumPy faster, with the bootstrap interval), where the case's numpy rows were timed; null elsewhere (the GPU
    pair, a case not run)."""
    out = []
    for row in rows:
        part = timings.filter((pl.col("n") == row["n"]) & (pl.col("dtype") == row["dtype"])
                              & (pl.col("pair") == row["pair"]) & (pl.col("mode") == row["mode"]))
        numpy_rows = part.filter(pl.col("configuration") == "numpy")
        extra = dict.fromkeys(NUMPY_COLUMNS)
        if numpy_rows.height:
            cmp = compare(part.filter(pl.col("configuration") == "interp"), numpy_rows, bootstrap)
            if cmp["status"] == "ok":
                extra = {"numpy_median_ms": cmp["compiled_median_ms"], "numpy_speedup": cmp["speedup"],
                         "numpy_speedup_low": cmp["speedup_low"], "numpy_speedup_high": cmp["speedup_high"]}
        out.append({**row, **extra})
    return out
