"""The numbers the report shows for the vision models, computed from the measured tables (rules, not the report).

- vision_speedups: each variant of vision_e2e against eager of the same job: ratio of medians with a bootstrap
  interval (measure/statistics.py), beside the study's Fig. 5.6 number.
- vision_timing_summary: median and interval per timing variant (Fig. 5.7).
- vision_layer_summary: per block, by timers and by subtraction, eager and compiled times and speedups (Fig.
  5.8, 5.10, 5.11), with switch costs. Subtraction differences the prefix medians after fitting them so that no
  block takes negative time (layer_fit.monotone_prefixes, oracles.py). Intervals resample whole rounds (a round's
  probes were measured together, so a round is the unit of independent drift), percentile bootstrap.
- vision_oracles: best of two runs (timers: Table 5.1; subtraction), the dynamic programme with switch costs and
  its exhaustive check. Each oracle chooses its plan once, from all rounds, and predicts that plan's time by its
  own sum: timers Σ block-timer medians; subtraction the empty call + Σ fitted block times; dp the same with switch
  costs. Every term is >= 0, so no prediction can be negative. The interval is the same sum for the same plan on
  resampled rounds: one estimator for point and interval, conditional on the choice (re-choosing per resample would
  track whichever plan each resample's noise flatters). The choice is optimised on the data that then judge it, so
  an optimised plan's prediction leans optimistic; realised selective compilation is the check.
- vision_selective_summary: predicted against realised selective compilation.
"""
from __future__ import annotations

import numpy as np
import polars as pl

from ...measure import statistics
from .. import configurations as cfgs
from . import layer_fit as layer_data
from . import oracles

CASE = ["model", "pair", "mode", "batch_size", "resolution", "numerics", "memory_format"]

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


def _by_invocation(df: pl.DataFrame) -> dict[int, dict[int, list[float]]]:
    """invocation -> turn -> the ok calls' times of one variant."""
    out: dict[int, dict[int, list[float]]] = {}
    for inv, turn, t in df.filter(pl.col("status") == "ok").select("invocation", "round", "time_ms").iter_rows():
        out.setdefault(inv if inv is not None else 0, {}).setdefault(turn, []).append(t)
    return out


def _failures(part: pl.DataFrame) -> str | None:
    bad = part.filter(pl.col("status") != "ok").unique(["invocation", "status", "message"], maintain_order=True)
    return "; ".join(f"invocation {inv}: {status}: {message}" for inv, status, message
                     in bad.select("invocation", "status", "message").iter_rows()) or None


def _against_eager(part: pl.DataFrame, eager: pl.DataFrame, resamples: int, confidence: float, seed: int) -> dict:
    """A variant's time (median of its invocations' medians, hierarchical interval) and its speedup over eager
    resampled as pairs of the turns both took in each invocation (statistics.paired_speedup); or the first
    failure's status. The message lists the invocations that failed, the others still count."""
    mine, base = _by_invocation(part), _by_invocation(eager)
    common = sorted(i for i in mine if i in base and set(mine[i]) & set(base[i]))
    if not common:
        status, message = _first_failure(part if not mine else eager)
        return dict(eager_ms=None, time_ms=None, time_ms_low=None, time_ms_high=None, speedup=None,
                    speedup_low=None, speedup_high=None, speedup_includes_one=None, invocations=len(mine),
                    status=status, message=message)
    opts = dict(resamples=resamples, confidence=confidence, seed=seed)
    t = statistics.hierarchical_interval([[x for calls in mine[i].values() for x in calls] for i in sorted(mine)],
                                         **opts)
    e = statistics.hierarchical_interval([[x for calls in base[i].values() for x in calls] for i in sorted(base)],
                                         **opts)
    turns = {i: sorted(set(mine[i]) & set(base[i])) for i in common}
    s = statistics.paired_speedup([[float(np.median(base[i][r])) for r in turns[i]] for i in common],
                                  [[float(np.median(mine[i][r])) for r in turns[i]] for i in common], **opts)
    return dict(eager_ms=e.estimate, time_ms=t.estimate, time_ms_low=t.low, time_ms_high=t.high, **s.columns(),
                invocations=len(mine), status="ok", message=_failures(part))


def device_busy(timing: pl.DataFrame) -> dict[tuple, float]:
    """(CASE..., configuration) -> median kernel time / median wall time of the profiled `pure` calls (GPU)."""
    if "device_ms" not in timing.columns:
        return {}
    part = timing.filter(pl.col("status") == "ok", pl.col("timing") == "pure", pl.col("profiled"),
                         pl.col("metric") == "e2e", pl.col("device_ms").is_not_null())
    out = {}
    for key, group in part.group_by([*CASE, "configuration"], maintain_order=True):
        wall = float(np.median(group["time_ms"].to_numpy()))
        out[tuple(key)] = float(np.median(group["device_ms"].to_numpy())) / wall if wall > 0 else None
    return out


def speedup_rows(e2e: pl.DataFrame, resamples: int, confidence: float, seed: int,
                 timing: pl.DataFrame | None = None) -> list[dict]:
    """vision_speedups; with the timing-method rows, each row's device-busy fractions: eager's (any mode: eager
    has none) and the variant's (compiled in the timing methods' mode only; null for the eager baselines)."""
    busy = device_busy(timing) if timing is not None else {}
    rows = []
    for key, group in e2e.group_by(CASE, maintain_order=True):
        case = dict(zip(CASE, key))
        eager_cfg, compiled_cfg = cfgs.PAIRS[case["pair"]]
        eager_busy = next((v for k, v in busy.items() if k[-1] == eager_cfg and all(
            k[i] == case[c] for i, c in enumerate(CASE) if c != "mode")), None)
        eager = group.filter(pl.col("variant") == "eager")
        for variant in [v for v in group["variant"].unique(maintain_order=True).to_list() if v != "eager"]:
            part = group.filter(pl.col("variant") == variant)
            ok = part.filter(pl.col("status") == "ok")["time_ms"].to_numpy()
            study = (STUDY_E2E.get(case["model"]) if case["pair"] == "gpu" and case["mode"] == "default"
                     and variant == "compiled" else None)
            row = {"run_id": run_ids(part.vstack(eager)), **case, "configuration": part["configuration"][0],
                   "variant": variant, "study_speedup": study, "samples": len(ok), "eager_device_busy": eager_busy,
                   "device_busy": busy.get((*key, compiled_cfg)) if variant == "compiled" else None}
            row.update(_against_eager(part, eager, resamples, confidence, seed))
            rows.append(row)
    return rows


def timing_summary_rows(timing: pl.DataFrame, resamples: int, confidence: float, seed: int) -> list[dict]:
    rows = []
    keys = [*CASE, "configuration", "timing", "profiled", "metric"]
    for key, group in timing.filter(pl.col("status") == "ok").group_by(keys, maintain_order=True):
        t = statistics.median_interval(group["time_ms"].to_numpy(), resamples=resamples, confidence=confidence,
                                       seed=seed)
        device = group["device_ms"].drop_nulls() if "device_ms" in group.columns else []
        busy = float(np.median(device.to_numpy())) / t.estimate if len(device) and t.estimate > 0 else None
        rows.append({"run_id": run_ids(group), **dict(zip(keys, key)), "time_ms": t.estimate,
                     "time_ms_low": t.low, "time_ms_high": t.high, "device_busy": busy, "samples": group.height})
    return rows


# The eager model as each step of a vision job timed it (vision_eager_baselines): (table, step, process, filter).
# e2e and selective share the clean worker's eager (one measurement); eager_in_process is the same model timed in
# the compiled worker after its compiled code loaded, in the same turns; layers and timing_sync are timed in the
# job's own process, which has compiled the model and its blocks.
EAGER_STEPS = (
    ("vision_e2e", "e2e", "clean", pl.col("variant") == "eager"),
    ("vision_e2e", "e2e in-process", "compiled", pl.col("variant") == "eager_in_process"),
    ("vision_selective", "selective", "clean", pl.col("variant") == "eager"),
    ("vision_timing_methods", "timing_sync", "job", (pl.col("timing") == "sync") & ~pl.col("profiled")),
)
_KEEP = [*CASE, "run_id", "invocation", "round", "time_ms", "status", "message"]


def _with_protocol_columns(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(*(pl.lit(None, pl.Int64).alias(c) for c in ("invocation",) if c not in df.columns))


def eager_baseline_rows(frames: dict[str, pl.DataFrame], resamples: int, confidence: float,
                        seed: int) -> list[dict]:
    """Every step's eager time of the whole model per case, and its ratio to the end-to-end step's eager (the
    baseline of vision_speedups): one eager, if the job's steps agree. Protocol steps (processes clean and
    compiled) are medians over invocations with the hierarchical interval and their ratio is paired by turn; the
    job's own steps are one process, their ratio unpaired.

    Steps: e2e (one row per compile mode it was paired with), e2e in-process (eager in each mode's compiled
    worker), layers (the all-eager prefix of every block, called block by block), selective, timing_sync
    (unprofiled, synchronised per call, as the others)."""
    parts = []
    for table, step, process, keep in EAGER_STEPS:
        df = frames.get(table)
        if df is None or df.is_empty():
            continue
        part = _with_protocol_columns(df).filter(keep).select(_KEEP)
        name = pl.format(f"{step} {{}}", "mode") if step.startswith("e2e") else pl.lit(step)
        parts.append(part.with_columns(step=name, process=pl.lit(process)))
    layers = frames.get("vision_layer_times")
    if layers is not None and not layers.is_empty():
        ok = layers.filter(pl.col("measure") == "prefix")
        ok = ok.filter(pl.col("configuration") == pl.col("pair").replace_strict(
            {p: e for p, (e, _) in cfgs.PAIRS.items()}, default=None))
        last = ok.group_by(CASE).agg(pl.col("block").max().alias("n"))
        full = _with_protocol_columns(ok.join(last, on=CASE).filter(pl.col("block") == pl.col("n")))
        parts.append(full.select(_KEEP).with_columns(step=pl.lit("layers"), process=pl.lit("job")))
    if not parts:
        return []
    every = pl.concat(parts)
    keys = [c for c in CASE if c != "mode"]     # eager has no mode; its steps pair it with different ones
    opts = dict(resamples=resamples, confidence=confidence, seed=seed)
    rows = []
    for key, group in every.group_by(keys, maintain_order=True):
        case = dict(zip(keys, key))
        reference = group.filter(pl.col("step").str.starts_with("e2e"), pl.col("process") == "clean")
        for (step, process), part in group.group_by(["step", "process"], maintain_order=True):
            ok = _by_invocation(part)
            if not ok:
                continue
            t = statistics.hierarchical_interval([[x for c in ok[i].values() for x in c] for i in sorted(ok)],
                                                 **opts)
            row = {"run_id": run_ids(part), **case, "step": step, "process": process, "time_ms": t.estimate,
                   "time_ms_low": t.low, "time_ms_high": t.high, "samples": sum(len(c) for i in ok
                                                                                for c in ok[i].values()),
                   "invocations": len(ok), "ratio_to_e2e": None, "ratio_to_e2e_low": None,
                   "ratio_to_e2e_high": None}
            if not reference.filter(pl.col("status") == "ok").is_empty():
                if process == "job":
                    r = statistics.speedup(part.filter(pl.col("status") == "ok")["time_ms"].to_numpy(),
                                           reference.filter(pl.col("status") == "ok")["time_ms"].to_numpy(), **opts)
                    ratio = (r.estimate, r.low, r.high)
                else:   # this step's eager / e2e's clean eager, paired by the turns both took
                    same = reference.filter(pl.col("step") == step.replace(" in-process", "")) \
                        if step.startswith("e2e") else reference.filter(pl.col("mode") == part["mode"][0])
                    a = _against_eager(same if not same.is_empty() else reference, part, **opts)
                    ratio = (a["speedup"], a["speedup_low"], a["speedup_high"])
                row.update(ratio_to_e2e=ratio[0], ratio_to_e2e_low=ratio[1], ratio_to_e2e_high=ratio[2])
            rows.append(row)
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


def layer_summary_rows(layers: pl.DataFrame, oracle_table: pl.DataFrame, resamples: int, confidence: float,
                       seed: int) -> list[dict]:
    rows = []
    for case, group, eager_cfg, compiled_cfg, s in _layer_groups(layers):
        if s is None:
            continue
        dp = oracle_table.filter(*[pl.col(c) == v for c, v in case.items()], pl.col("oracle") == "dp")
        dp_choice = dp["choice"][0] if dp.height and dp["choice"][0] else None
        idx = layer_data.round_resamples(s.timer_eager.shape[1], resamples, seed)
        model = layer_data.prefix_fit(s).model
        boot = [fit.model for fit in layer_data.prefix_fits(s, idx)]
        per_method = {
            "timer": (layer_data.medians(s.timer_eager), layer_data.medians(s.timer_compiled),
                      layer_data.resampled_medians(s.timer_eager, idx),
                      layer_data.resampled_medians(s.timer_compiled, idx)),
            "subtraction": (model.eager, model.compiled, np.stack([m.eager for m in boot], axis=1),
                            np.stack([m.compiled for m in boot], axis=1)),
        }
        for method, (e, c, eb, cb) in per_method.items():
            with np.errstate(divide="ignore", invalid="ignore"):   # a fitted block time can be 0
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


ORACLES = ("btr_timers", "btr_subtraction", "dp")


def _estimates(s: layer_data.LayerSamples, rounds: np.ndarray | None):
    """(fitted switch-cost model, eager timer medians, compiled timer medians) from `rounds` (None: all once)."""
    return (layer_data.prefix_fit(s, rounds), layer_data.medians(s.timer_eager, rounds),
            layer_data.medians(s.timer_compiled, rounds))


def _decide(fit: layer_data.PrefixFit, te: np.ndarray, tc: np.ndarray, max_exhaustive: int):
    """({oracle: Decision}, the exhaustive optimum of the switch-cost model or None where 2^n is too many)."""
    model = fit.model
    decisions = {"btr_timers": oracles.best_of_two_runs(te, tc),
                 "btr_subtraction": oracles.best_of_two_runs(model.eager, model.compiled),
                 "dp": oracles.dynamic_programme(model)}
    return decisions, (oracles.exhaustive(model) if model.n <= max_exhaustive else None)


def _plan_times(fit: layer_data.PrefixFit, te: np.ndarray, tc: np.ndarray, choices: dict) -> dict:
    """{oracle: (predicted_ms, reference_ms)} of each oracle's fixed choice, by that oracle's own sum.

    Every term is >= 0 (timer medians, the empty call, fitted block times and block-with-switch times), so no
    prediction is negative. Timers predict against Σ eager timers; subtraction and dp against eager end to end.
    """
    model = fit.model
    timers, sub = (np.asarray(choices[o], bool) for o in ("btr_timers", "btr_subtraction"))
    return {"btr_timers": (float(np.where(timers, tc, te).sum()), float(te.sum())),
            "btr_subtraction": (fit.empty_ms + float(np.where(sub, model.compiled, model.eager).sum()),
                                fit.eager_ms),
            "dp": (fit.empty_ms + model.cost(choices["dp"]), fit.eager_ms)}


def _bootstrap(s: layer_data.LayerSamples, choices: dict, rounds: np.ndarray, resamples: int,
               seed: int) -> np.ndarray:
    """[oracle, resample, (predicted_ms, reference_ms)]: _plan_times of the fixed choices on `rounds` resampled."""
    idx = rounds[layer_data.round_resamples(len(rounds), resamples, seed)]
    te, tc = (layer_data.resampled_medians(timer, idx) for timer in (s.timer_eager, s.timer_compiled))
    times = [_plan_times(fit, te[:, k], tc[:, k], choices) for k, fit in enumerate(layer_data.prefix_fits(s, idx))]
    return np.array([[t[o] for t in times] for o in ORACLES]).reshape(len(ORACLES), resamples, 2)


def _halves(n_rounds: int) -> tuple[np.ndarray, np.ndarray, str]:
    """(rounds the oracles choose on, rounds their choices are predicted on, which): the even rounds and the odd
    ones, so that a prediction is not judged on the noise its choice was fitted to (a minimum over noisy
    estimates promises more than it delivers); one round serves both."""
    if n_rounds < 2:
        every = np.arange(n_rounds)
        return every, every, "same"
    return np.arange(0, n_rounds, 2), np.arange(1, n_rounds, 2), "held-out"


def _speedup(reference, predicted) -> np.ndarray:
    """reference / predicted; NaN where nothing is predicted (every fitted time 0), which intervals drop."""
    predicted = np.asarray(predicted, float)
    return np.divide(reference, predicted, out=np.full(predicted.shape, np.nan), where=predicted > 0)


def _oracle_columns(s: layer_data.LayerSamples, max_exhaustive: int, resamples: int, confidence: float,
                    seed: int) -> dict[str, dict]:
    """{oracle: the vision_oracles columns that depend on the layer rows}."""
    choose, predict, held = _halves(s.timer_eager.shape[1])
    chosen = _estimates(s, choose)
    decisions, ex = _decide(*chosen, max_exhaustive)
    choices = {o: d.choice for o, d in decisions.items()}
    point = _estimates(s, predict)
    fit = point[0]
    times = _plan_times(*point, choices)
    boot = _bootstrap(s, choices, predict, resamples, seed)
    out = {}
    for o, b in zip(ORACLES, boot):
        predicted, reference = times[o]
        speedup = float(_speedup(reference, predicted))
        (p_lo, p_hi), (s_lo, s_hi) = _quantiles(b[:, 0], confidence), _quantiles(_speedup(b[:, 1], b[:, 0]),
                                                                                  confidence)
        dp_ex = ex if o == "dp" else None
        out[o] = {"blocks": s.n, "choice": oracles.choice_string(choices[o]),
                  "compiled_blocks": len(decisions[o].compiled_blocks), "reference_ms": reference,
                  "predicted_ms": predicted, "predicted_ms_low": p_lo, "predicted_ms_high": p_hi,
                  "predicted_speedup": speedup if np.isfinite(speedup) else None,
                  "predicted_speedup_low": s_lo, "predicted_speedup_high": s_hi,
                  "switch_model_ms": fit.empty_ms + fit.model.cost(choices[o]),
                  "exhaustive_ms": chosen[0].empty_ms + dp_ex.predicted_ms if dp_ex else None,
                  "exhaustive_choice": oracles.choice_string(dp_ex.choice) if dp_ex else None,
                  "dp_matches_exhaustive": (bool(np.isclose(dp_ex.predicted_ms, decisions[o].predicted_ms,
                                                            rtol=1e-9, atol=1e-12)) if dp_ex else None),
                  "prediction_rounds": held}
    return out


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
                         "resamples": 0, "prediction_rounds": None} for o in ORACLES)
            continue
        for o, columns in _oracle_columns(s, max_exhaustive, resamples, confidence, seed).items():
            study = STUDY_BTR.get(case["model"]) if o == "btr_timers" and case["pair"] == "gpu" else None
            rows.append({**base, "oracle": o, **columns, "study_speedup": study, "resamples": resamples})
    return rows


def _prediction_error(row: dict) -> dict:
    """predicted speedup / realised speedup over one eager baseline = realised ms / predicted ms (the baseline
    cancels, so the eager of neither step enters). Above 1: the oracle promised more than the plan delivered.
    Interval: the realised interval over the predicted one, ends crossed (conservative: both are 95%)."""
    p, lo, hi, t = row["predicted_ms"], row["predicted_ms_low"], row["predicted_ms_high"], row["time_ms"]
    if p is None or t is None or not p > 0:
        return dict.fromkeys(("prediction_error", "prediction_error_low", "prediction_error_high"))
    return {"prediction_error": t / p,
            "prediction_error_low": row["time_ms_low"] / hi if hi and hi > 0 else None,
            "prediction_error_high": row["time_ms_high"] / lo if lo and lo > 0 else None}


def selective_summary_rows(selective: pl.DataFrame, oracle_table: pl.DataFrame, resamples: int,
                           confidence: float, seed: int) -> list[dict]:
    rows = []
    from .selective import VARIANTS
    for key, group in selective.group_by(CASE, maintain_order=True):
        case = dict(zip(CASE, key))
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
                   "predicted_ms_low": o_row["predicted_ms_low"][0] if o_row.height else None,
                   "predicted_ms_high": o_row["predicted_ms_high"][0] if o_row.height else None,
                   "predicted_speedup": o_row["predicted_speedup"][0] if o_row.height else None,
                   "study_speedup": study, "samples": len(ok)}
            row.update(_against_eager(part, group.filter(pl.col("variant") == "eager"), resamples, confidence,
                                      seed))
            row.update(_prediction_error(row))
            rows.append(row)
    return rows
