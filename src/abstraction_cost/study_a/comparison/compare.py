"""The backend comparison table (rule compare_backends): per implementation, the median time per sample with its
bootstrap interval, the speedup over eager, peak memory, and parity errors of its logits against eager's.

Parity compares the logits each implementation computed on the same batch from the same weights on the same
device in the same numerics (study_a.backends.numerics: one comparison per numerics, compare_numerics). Bitwise equality is not expected: TorchScript's
fusions, AOTInductor's generated kernels and a different process's choice of convolution algorithm all reorder
floating-point sums. `parity_ok` applies study_a.backends.logit_tolerance to max |Δlogit| / max |eager logit|, so
that the verdict does not depend on the logits' scale (large with untrained weights in eval mode). An
implementation that fails it is `wrong_output`, with no speedup: a faster wrong answer is not a speedup.

Times (docs/measurement.md): rows of the interleaved protocol (with an `invocation`) give the median over
invocations of each invocation's median with measure/statistics.hierarchical_interval, and the speedup against
eager from the turns both took in the same invocations, resampled as pairs (paired_speedup); an invocation that
failed beside ok ones leaves the row ok and says so in `message`. Serial rows (one process, calls back to back)
keep the calls' median and bootstrap interval and the independent speedup.
"""
from __future__ import annotations

import os
from typing import Mapping

import numpy as np
import polars as pl

from ... import implementations
from ...measure import numerics as nx
from ...measure import statistics

BASELINE = "eager"


def read_logits(path: str | os.PathLike, batch_size: int) -> np.ndarray | None:
    """batch × classes float32 logits, or None when the job left none (an empty file)."""
    data = np.fromfile(path, dtype="<f4")
    if data.size == 0:
        return None
    if data.size % batch_size:
        raise ValueError(f"{path}: {data.size} floats is not a multiple of the batch size {batch_size}")
    return data.reshape(batch_size, -1)


def parity(logits: np.ndarray | None, baseline: np.ndarray | None, tolerance: float) -> dict:
    """Parity columns of one implementation against the baseline's logits."""
    empty = {"max_abs_logit_diff": None, "max_rel_logit_diff": None, "argmax_agreement": None,
             "parity_tolerance": tolerance, "parity_ok": None}
    if baseline is None:
        return {**empty, "parity_message": f"no {BASELINE} logits to compare with"}
    if logits is None:
        return {**empty, "parity_message": "this implementation produced no logits"}
    if logits.shape != baseline.shape:
        return {**empty, "parity_message": f"logits shape {logits.shape} differs from {BASELINE}'s {baseline.shape}"}
    diff = float(np.max(np.abs(logits.astype(np.float64) - baseline.astype(np.float64))))
    scale = float(np.max(np.abs(baseline)))
    relative = diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))
    return {"max_abs_logit_diff": diff, "max_rel_logit_diff": relative,
            "argmax_agreement": float(np.mean(logits.argmax(axis=1) == baseline.argmax(axis=1))),
            "parity_tolerance": tolerance, "parity_ok": relative <= tolerance, "parity_message": None}


def _status(rows: pl.DataFrame) -> tuple[str, str | None]:
    bad = rows.filter(pl.col("status") != "ok")
    if not bad.height:
        return "ok", None
    if _interleaved(rows) and bad.height < rows.height:   # some invocations measured it: the others are a note
        return "ok", "; ".join(f"invocation {i}: {s}: {m}" for i, s, m in
                               zip(bad["invocation"], bad["status"], bad["message"]))
    return bad["status"][0], bad["message"][0]


def _interleaved(rows: pl.DataFrame) -> bool:
    return "invocation" in rows.columns and rows["invocation"].null_count() < rows.height


def _invocation_groups(ok: pl.DataFrame, column: str = "time_per_sample_ms") -> list[list[float]]:
    return [g[column].to_list() for g in ok.sort("invocation", "repeat").partition_by("invocation",
                                                                                       maintain_order=True)]


def _turn_medians(ok: pl.DataFrame) -> pl.DataFrame:
    return ok.group_by("invocation", "turn").agg(pl.col("time_per_sample_ms").median().alias("t"))


def interleaved_columns(ok: pl.DataFrame, baseline_ok: pl.DataFrame, is_baseline: bool, seed: int) -> dict:
    """Time and speedup columns of one implementation's ok interleaved rows (baseline_ok: eager's)."""
    groups = _invocation_groups(ok)
    interval = statistics.hierarchical_interval(groups, seed=seed)
    medians = [statistics.median(g) for g in groups]
    row = {"repeats": ok.height, "invocations": len(groups), "time_per_sample_ms": interval.estimate,
           "time_per_sample_ms_low": interval.low, "time_per_sample_ms_high": interval.high,
           "invocation_spread": max(medians) / min(medians) if len(medians) > 1 else None,
           "warmup_calls": ok["warmup_calls"].max(), "steady": bool(ok["steady"].fill_null(True).all())}
    if is_baseline:
        row.update(statistics.Speedup(1.0, 1.0, 1.0).columns("speedup_vs_eager"), paired_turns=None)
    elif baseline_ok.height:
        paired = _turn_medians(ok).join(_turn_medians(baseline_ok), on=["invocation", "turn"], suffix="_base")
        row["paired_turns"] = paired.height
        if paired.height:
            parts = paired.sort("invocation", "turn").partition_by("invocation", maintain_order=True)
            row.update(statistics.paired_speedup([p["t_base"].to_list() for p in parts],
                                                 [p["t"].to_list() for p in parts], seed=seed)
                       .columns("speedup_vs_eager"))
    return row


def parity_tolerance(numerics: str, logit_tolerance: float) -> float:
    """study_a.backends.logit_tolerance in fp32; at least the numerics' own output tolerance otherwise (two
    implementations' TF32 or bfloat16 kernels round differently, as eager's and a compiler's do)."""
    if numerics == "fp32":
        return logit_tolerance
    return max(logit_tolerance, nx.tolerance(numerics).relative)


def compare_numerics(evals: pl.DataFrame, logits_paths: Mapping[str, Mapping[str, str | os.PathLike]],
                     logit_tolerance: float, seed: int) -> list[dict]:
    """compare() per numerics (logits_paths: numerics -> implementation -> path), each against eager in the
    same numerics with that numerics' parity tolerance."""
    out = []
    for numerics, paths in logits_paths.items():
        part = evals.filter(pl.col("numerics") == numerics)
        out += compare(part, paths, parity_tolerance(numerics, logit_tolerance), seed)
    return out


def compare(evals: pl.DataFrame, logits_paths: Mapping[str, str | os.PathLike], tolerance: float,
            seed: int) -> list[dict]:
    """One backend_comparison row per implementation in logits_paths (in its order)."""
    ok = evals.filter(pl.col("status") == "ok")
    baseline_ok = ok.filter(pl.col("implementation") == BASELINE)
    baseline_times = baseline_ok["time_per_sample_ms"].to_list()
    logits = {}
    for name, path in logits_paths.items():
        rows = evals.filter(pl.col("implementation") == name)
        batch = rows["batch_size"][0] if rows.height else None
        logits[name] = read_logits(path, batch) if batch else None
    out = []
    for name in logits_paths:
        rows = evals.filter(pl.col("implementation") == name)
        impl = implementations.REGISTRY[name]
        first = rows.row(0, named=True) if rows.height else {}
        status, message = _status(rows)
        row = {"run_id": first.get("run_id"), "implementation": name, "numerics": first.get("numerics"),
               "backend": impl.backend,
               "runtime": impl.runtime, "method": first.get("method"), "device": first.get("device"),
               "batch_size": first.get("batch_size"), "resolution": first.get("resolution"),
               "status": status, "message": message, "repeats": 0, "load_s": first.get("load_s"),
               "prepare_s": first.get("prepare_s"), "mem_used_mib_max": first.get("mem_used_mib_max"),
               "alloc_peak_mib": first.get("alloc_peak_mib"), "protocol": first.get("protocol"),
               **dict.fromkeys(("invocations", "warmup_calls", "steady", "invocation_spread", "paired_turns")),
               "conv_algo": first.get("conv_algo"), "workspace_mib": first.get("workspace_mib"),
               # null unless timed: an implementation that was not run, or failed, has no time to compare
               **dict.fromkeys(("time_per_sample_ms", "time_per_sample_ms_low", "time_per_sample_ms_high",
                                "speedup_vs_eager", "speedup_vs_eager_low", "speedup_vs_eager_high",
                                "speedup_vs_eager_includes_one"))}
        mine = rows.filter(pl.col("status") == "ok")
        times = mine["time_per_sample_ms"].to_list()
        if mine.height:  # memory of a measured invocation, not of a failed one's row
            first_ok = mine.row(0, named=True)
            row.update({k: first_ok.get(k) for k in ("mem_used_mib_max", "alloc_peak_mib")})
        if status == "ok" and times and _interleaved(mine):
            row.update(interleaved_columns(mine, baseline_ok, name == BASELINE, seed))
        elif status == "ok" and times:
            interval = statistics.median_interval(times, seed=seed)
            row.update(repeats=len(times), time_per_sample_ms=interval.estimate,
                       time_per_sample_ms_low=interval.low, time_per_sample_ms_high=interval.high)
            if name == BASELINE:  # against itself: exactly 1, no interval to estimate
                row.update(statistics.Speedup(1.0, 1.0, 1.0).columns("speedup_vs_eager"))
            elif baseline_times:
                row.update(statistics.speedup(baseline_times, times, seed=seed).columns("speedup_vs_eager"))
        row.update(parity(logits.get(name), logits.get(BASELINE), tolerance))
        if row["status"] == "ok" and row["parity_ok"] is False:   # correct before fast: no speedup to show
            row.update(status="wrong_output", paired_turns=None,
                       message=f"logits differ from {BASELINE}'s: max |Δlogit| / max "
                       f"|{BASELINE} logit| = {row['max_rel_logit_diff']:.3g} > {tolerance}",
                       **dict.fromkeys(("speedup_vs_eager", "speedup_vs_eager_low", "speedup_vs_eager_high",
                                        "speedup_vs_eager_includes_one")))
        if row["run_id"] is None:  # every eval job writes at least one row, so its part is missing
            raise ValueError(f"backend_eval has no rows for implementation {name!r}")
        out.append(row)
    return out
