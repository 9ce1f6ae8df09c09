"""The numbers the report shows for the vision models, computed from the measured tables (rules, not the report).

- vision_speedups: each variant of vision_e2e against eager of the same job: ratio of medians with a bootstrap
  interval (measure/statistics.py), beside the study's Fig. 5.6 number.
- vision_timing_summary: median and interval per timing variant (Fig. 5.7).
- vision_layer_summary: per block, by timers and by subtraction, eager and compiled times and speedups (Fig.
  5.8, 5.10, 5.11), with switch costs. Intervals resample whole rounds (a round's probes were measured
  together, so a round is the unit of independent drift), percentile bootstrap.
- vision_oracles: best of two runs (timers: Table 5.1; subtraction), the dynamic programme with switch costs and
  its exhaustive check; intervals again over resampled rounds (the oracle recomputed on each resample).
- vision_selective_summary: predicted against realised selective compilation.
"""
from __future__ import annotations

import numpy as np
import polars as pl

from ..measure import statistics
from . import configurations as cfgs
from . import layers as layer_data
from . import oracles

CASE = ["model", "pair", "mode", "batch_size", "resolution"]

# Goldfarb 2024: Fig. 5.6 / sec. 6.1 (GPU, default mode, whole model compiled), Table 5.1 (best of two runs
# from layer timers), sec. 6.1 (realised selective compilation, "custom oracle configuration").
STUDY_E2E = {"resnet50": 1.61, "googlenet": 1.43, "mobilenet_v2": 1.63}
STUDY_BTR = {"alexnet": 1.043, "densenet121": 1.037, "googlenet": 1.021, "mobilenet_v2": 1.045,
             "resnet50": 1.032, "squeezenet1_1": 1.046}
STUDY_SELECTIVE = {"resnet50": 1.23, "googlenet": 1.15, "mobilenet_v2": 1.19}


def run_ids(df: pl.DataFrame) -> str:
    return ",".join(sorted(set(df["run_id"].drop_nulls().to_list())))


def _quantiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    q = (1 - confidence) / 2
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan"), float("nan")
    return float(np.quantile(values, q)), float(np.quantile(values, 1 - q))


def _first_failure(df: pl.DataFrame) -> tuple[str, str | None]:
    bad = df.filter(pl.col("status") != "ok")
    if bad.is_empty():
        return "missing", "no ok rows"
    return bad["status"][0], bad["message"][0]


def _against_eager(part: pl.DataFrame, ok: np.ndarray, eager: pl.DataFrame, eager_ok: np.ndarray,
                   resamples: int, confidence: float, seed: int) -> dict:
    """A variant's median time and speedup over eager with bootstrap intervals, or the first failure's status."""
    if len(ok) and len(eager_ok):
        s = statistics.speedup(eager_ok, ok, resamples=resamples, confidence=confidence, seed=seed)
        t = statistics.median_interval(ok, resamples=resamples, confidence=confidence, seed=seed)
        return dict(eager_ms=float(np.median(eager_ok)), time_ms=t.estimate, time_ms_low=t.low, time_ms_high=t.high,
                    **s.columns(), status="ok", message=None)
    status, message = _first_failure(part if not len(ok) else eager)
    return dict(eager_ms=None, time_ms=None, time_ms_low=None, time_ms_high=None, speedup=None, speedup_low=None,
                speedup_high=None, speedup_includes_one=None, status=status, message=message)


def speedup_rows(e2e: pl.DataFrame, resamples: int, confidence: float, seed: int) -> list[dict]:
    rows = []
    for key, group in e2e.group_by(CASE, maintain_order=True):
        case = dict(zip(CASE, key))
        eager = group.filter(pl.col("variant") == "eager")
        eager_ok = eager.filter(pl.col("status") == "ok")["time_ms"].to_numpy()
        for variant in [v for v in group["variant"].unique(maintain_order=True).to_list() if v != "eager"]:
            part = group.filter(pl.col("variant") == variant)
            ok = part.filter(pl.col("status") == "ok")["time_ms"].to_numpy()
            study = (STUDY_E2E.get(case["model"]) if case["pair"] == "gpu" and case["mode"] == "default"
                     and variant == "compiled" else None)
            row = {"run_id": run_ids(part.vstack(eager)), **case, "configuration": part["configuration"][0],
                   "variant": variant, "study_speedup": study, "samples": len(ok)}
            row.update(_against_eager(part, ok, eager, eager_ok, resamples, confidence, seed))
            rows.append(row)
    return rows


def timing_summary_rows(timing: pl.DataFrame, resamples: int, confidence: float, seed: int) -> list[dict]:
    rows = []
    keys = [*CASE, "configuration", "timing", "profiled", "metric"]
    for key, group in timing.filter(pl.col("status") == "ok").group_by(keys, maintain_order=True):
        t = statistics.median_interval(group["time_ms"].to_numpy(), resamples=resamples, confidence=confidence,
                                       seed=seed)
        rows.append({"run_id": run_ids(group), **dict(zip(keys, key)), "time_ms": t.estimate,
                     "time_ms_low": t.low, "time_ms_high": t.high, "samples": group.height})
    return rows


def _layer_groups(layers: pl.DataFrame):
    for key, group in layers.group_by(CASE, maintain_order=True):
        case = dict(zip(CASE, key))
        eager_cfg, compiled_cfg = cfgs.PAIRS[case["pair"]]
        try:
            samples = layer_data.samples_from_rows(group, eager_cfg, compiled_cfg)
        except layer_data.IncompleteLayers:
            yield case, group, eager_cfg, compiled_cfg, None
            continue
        yield case, group, eager_cfg, compiled_cfg, samples


def _resampled_medians(cube: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """[probe, resample]: medians of the cube [probe, round, repeat] over each resample's rounds."""
    picked = cube[:, idx, :]                                   # [probe, resample, round, repeat]
    return np.median(picked.reshape(cube.shape[0], idx.shape[0], -1), axis=2)


def layer_summary_rows(layers: pl.DataFrame, oracle_table: pl.DataFrame, resamples: int, confidence: float,
                       seed: int) -> list[dict]:
    rows = []
    for case, group, eager_cfg, compiled_cfg, s in _layer_groups(layers):
        if s is None:
            continue
        dp = oracle_table.filter(*[pl.col(c) == v for c, v in case.items()], pl.col("oracle") == "dp")
        dp_choice = dp["choice"][0] if dp.height and dp["choice"][0] else None
        idx = layer_data.round_resamples(s.timer_eager.shape[1], resamples, seed)
        model = layer_data.cost_model(s)
        per_method = {
            "timer": (layer_data.medians(s.timer_eager), layer_data.medians(s.timer_compiled),
                      _resampled_medians(s.timer_eager, idx), _resampled_medians(s.timer_compiled, idx)),
            "subtraction": (model.eager, model.compiled,
                            np.diff(_resampled_medians(s.prefix_eager, idx), axis=0),
                            np.diff(_resampled_medians(s.prefix_compiled, idx), axis=0)),
        }
        for method, (e, c, eb, cb) in per_method.items():
            with np.errstate(divide="ignore", invalid="ignore"):   # subtraction can go negative on noise
                ratio = np.where((eb > 0) & (cb > 0), eb / cb, np.nan)
            for i in range(s.n):
                e_lo, e_hi = _quantiles(eb[i], confidence)
                c_lo, c_hi = _quantiles(cb[i], confidence)
                r_lo, r_hi = _quantiles(ratio[i], confidence)
                speedup = float(e[i] / c[i]) if c[i] > 0 and e[i] > 0 else None
                rows.append({"run_id": run_ids(group), **case, "configuration": compiled_cfg, "method": method,
                             "block": i, "block_name": s.names[i], "block_kind": s.kinds[i],
                             "eager_ms": float(e[i]), "eager_ms_low": e_lo, "eager_ms_high": e_hi,
                             "compiled_ms": float(c[i]), "compiled_ms_low": c_lo, "compiled_ms_high": c_hi,
                             "speedup": speedup, "speedup_low": r_lo, "speedup_high": r_hi,
                             "speedup_includes_one": bool(r_lo <= 1.0 <= r_hi) if np.isfinite(r_lo) else None,
                             "to_compiled_ms": float(model.to_compiled[i]) if method == "subtraction" and i else None,
                             "to_eager_ms": float(model.to_eager[i]) if method == "subtraction" and i else None,
                             "dp_compiled": dp_choice[i] == "c" if dp_choice else None})
    return rows


def _oracle_point(s: layer_data.LayerSamples, max_exhaustive: int):
    """{oracle: (choice, predicted_ms, reference_ms, switch_model_ms, exhaustive decision)} from all rounds."""
    model = layer_data.cost_model(s, None)
    empty = float(layer_data.medians(s.prefix_eager[:1], None)[0])     # P_e[0]: the empty call
    reference = float(layer_data.medians(s.prefix_eager[-1:], None)[0])  # P_e[n]: eager end to end
    te, tc = layer_data.medians(s.timer_eager, None), layer_data.medians(s.timer_compiled, None)
    dp = oracles.dynamic_programme(model)
    btr_sub = oracles.best_of_two_runs(model.eager, model.compiled)
    btr_tim = oracles.best_of_two_runs(te, tc)
    ex = oracles.exhaustive(model) if model.n <= max_exhaustive else None
    return {
        "btr_timers": (btr_tim, btr_tim.predicted_ms, float(te.sum()), model.cost(btr_tim.choice) + empty, None),
        "btr_subtraction": (btr_sub, btr_sub.predicted_ms + empty, reference,
                            model.cost(btr_sub.choice) + empty, None),
        "dp": (dp, dp.predicted_ms + empty, reference, dp.predicted_ms + empty, ex),
    }


def _plan_resample(s: layer_data.LayerSamples, rounds: np.ndarray, point: dict) -> dict:
    """{oracle: (predicted_ms, reference_ms)} of each oracle's chosen plan under one resample of the rounds.

    The interval of a prediction is that of the chosen plan's time; re-optimising on every resample would pick
    whichever plan the resample's noise flatters most, and subtraction noise can make that time negative.
    """
    model = layer_data.cost_model(s, rounds)
    empty = float(layer_data.medians(s.prefix_eager[:1], rounds)[0])
    reference = float(layer_data.medians(s.prefix_eager[-1:], rounds)[0])
    te, tc = layer_data.medians(s.timer_eager, rounds), layer_data.medians(s.timer_compiled, rounds)
    timers = np.asarray(point["btr_timers"][0].choice, bool)
    return {
        "btr_timers": (float(np.where(timers, tc, te).sum()), float(te.sum())),
        "btr_subtraction": (model.cost(point["btr_subtraction"][0].choice) + empty, reference),
        "dp": (model.cost(point["dp"][0].choice) + empty, reference),
    }


def oracle_rows(layers: pl.DataFrame, resamples: int, confidence: float, seed: int,
                max_exhaustive: int) -> list[dict]:
    rows = []
    for case, group, _, compiled_cfg, s in _layer_groups(layers):
        base = {"run_id": run_ids(group), **case, "configuration": compiled_cfg}
        if s is None:
            rows.extend({**base, "oracle": o, "blocks": None, "choice": None, "compiled_blocks": None,
                         "reference_ms": None, "predicted_ms": None, "predicted_ms_low": None,
                         "predicted_ms_high": None, "predicted_speedup": None, "predicted_speedup_low": None,
                         "predicted_speedup_high": None, "switch_model_ms": None, "exhaustive_ms": None,
                         "exhaustive_choice": None, "dp_matches_exhaustive": None, "study_speedup": None,
                         "resamples": 0} for o in ("btr_timers", "btr_subtraction", "dp"))
            continue
        point = _oracle_point(s, max_exhaustive)
        idx = layer_data.round_resamples(s.timer_eager.shape[1], resamples, seed)
        boot = {o: ([], []) for o in point}
        for rounds in idx:
            for o, (predicted, reference) in _plan_resample(s, rounds, point).items():
                boot[o][0].append(predicted)
                boot[o][1].append(reference / predicted if predicted > 0 else np.nan)
        for o, (decision, predicted, reference, switch_ms, ex) in point.items():
            p_lo, p_hi = _quantiles(np.array(boot[o][0]), confidence)
            s_lo, s_hi = _quantiles(np.array(boot[o][1]), confidence)
            rows.append({**base, "oracle": o, "blocks": s.n, "choice": oracles.choice_string(decision.choice),
                         "compiled_blocks": len(decision.compiled_blocks), "reference_ms": reference,
                         "predicted_ms": predicted, "predicted_ms_low": p_lo, "predicted_ms_high": p_hi,
                         "predicted_speedup": reference / predicted if predicted > 0 else None,
                         "predicted_speedup_low": s_lo, "predicted_speedup_high": s_hi,
                         "switch_model_ms": switch_ms,
                         "exhaustive_ms": (ex.predicted_ms + (predicted - decision.predicted_ms)) if ex else None,
                         "exhaustive_choice": oracles.choice_string(ex.choice) if ex else None,
                         "dp_matches_exhaustive": (bool(np.isclose(ex.predicted_ms, decision.predicted_ms,
                                                                   rtol=1e-9, atol=1e-12)) if ex else None),
                         "study_speedup": STUDY_BTR.get(case["model"]) if o == "btr_timers" and
                         case["pair"] == "gpu" else None, "resamples": resamples})
    return rows


def selective_summary_rows(selective: pl.DataFrame, oracle_table: pl.DataFrame, resamples: int,
                           confidence: float, seed: int) -> list[dict]:
    rows = []
    from .selective import VARIANTS
    for key, group in selective.group_by(CASE, maintain_order=True):
        case = dict(zip(CASE, key))
        eager_ok = group.filter(pl.col("variant") == "eager", pl.col("status") == "ok")["time_ms"].to_numpy()
        found = oracle_table.filter(*[pl.col(c) == v for c, v in case.items()])
        for variant in [v for v in group["variant"].unique(maintain_order=True).to_list() if v != "eager"]:
            part = group.filter(pl.col("variant") == variant)
            ok = part.filter(pl.col("status") == "ok")["time_ms"].to_numpy()
            oracle = VARIANTS.get(variant, (None, None))[0]
            o_row = found.filter(pl.col("oracle") == oracle) if oracle else found.clear()
            predicted = o_row["predicted_ms"][0] if o_row.height else None
            study = None
            if case["pair"] == "gpu" and case["mode"] == "default":
                study = {"compiled": STUDY_E2E, "dp_blocks": STUDY_SELECTIVE,
                         "dp_segments": STUDY_SELECTIVE}.get(variant, {}).get(case["model"])
            row = {"run_id": run_ids(part), **case, "configuration": part["configuration"][0], "variant": variant,
                   "choice": part["choice"][0], "predicted_ms": predicted,
                   "predicted_speedup": o_row["predicted_speedup"][0] if o_row.height else None,
                   "study_speedup": study, "samples": len(ok)}
            row.update(_against_eager(part, ok, group.filter(pl.col("variant") == "eager"), eager_ok, resamples,
                                      confidence, seed))
            rows.append(row)
    return rows
