"""Speedups of compiled over eager from timing tables: ratio of medians with a bootstrap interval per case.

    speedup_rows(timings, keys=["n", "dtype"], bootstrap=Bootstrap(10_000, 0.95, seed=0))

For every (keys, pair, mode) the eager rows (compiled = false) and compiled rows are compared; a group where
either side is not all `ok` gets that side's status and message (error before oom before missing before not_run)
and null numbers, so that the report can say why a speedup is absent.
"""
from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ...measure import statistics
from ..configurations import PAIRS

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
        # the pair's own two configurations (a matmul case's numpy rows are compared apart: matmul.with_numpy)
        eager = part.filter(~pl.col("compiled") & (pl.col("configuration") == eager_name))
        compiled = part.filter(pl.col("compiled"))
        first = compiled["first_call_ms"].drop_nulls()
        # eager and compiled of one group are timed by one job: its run_id joins the environment
        rows.append({"run_id": part["run_id"][0], **group, "eager_configuration": eager_name, "compiled_configuration": compiled_name,
                     "compiled_first_call_ms": first[0] if first.len() else None,
                     **compare(eager, compiled, bootstrap)})
    return rows
