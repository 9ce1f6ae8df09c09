"""One job per (model, pair): every step of Study B's vision models (rule vision_model).

Steps, in this order, for every setting of the job's axes (batch size, numerics, memory format;
vision_models.settings) under that setting's numerics (measure/numerics.py: TF32 flags, and autocast around
every call); step 4 runs for every setting after all of them, so that no profiler has run before any other
step's timing:

1. in the layer mode, in the job's process: the per-layer times, with the whole model and its blocks compiled
   once (vision_models.ensure_compiled);
2. the oracles, computed from this job's layer rows (vision_summary.oracle_rows, as the table vision_oracles);
3. end to end in every compile mode and selective compilation of the oracles' choices, under the protocol
   (vision_protocol.py): eager in worker processes that load no compiled code, each mode's compiled model (and
   the selective variants) in workers of their own, in short turns, over invocations of fresh processes; both
   steps share the clean eager, so their baselines are one measurement;
4. the timing methods, last, in the job's process: their profiled variants start torch.profiler (CUPTI on the
   GPU), which may leave per-launch overhead behind in the process, so nothing else is timed after them.

The job's own process pays torch's import and CUDA's start-up once for the in-process steps; the protocol's
workers each pay theirs, overlapped. Steps that fail become rows with their status; a failure in one step does
not stop the next. Each step's rows (each protocol invocation's records) are kept on disk as it completes
(measure/steps.py), so a job killed after hours resumes at the first step it had not finished.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager

import polars as pl
import torch

from ... import tables
from ...measure import numerics as nx
from ...measure import steps
from ...measure.run import PrefixedRun
from ...tables.study_b_models import JOB_TABLES
from . import layers, selective, timing_methods, protocol as vision_protocol, summary as vision_summary
from . import vision as vm


def layer_case(config: dict, model: str, pair: str, setting: vm.Setting | None = None) -> vm.Case:
    return vm.case_from_config(config, model, pair, config["study_b"]["models"]["layer_mode"], setting)


def run_device(config: dict, model: str, pair: str) -> torch.device:
    return vm.run_device(layer_case(config, model, pair), config)


@contextmanager
def _step(log: logging.Logger, what: str):
    start = time.perf_counter()
    yield
    log.info("%s done in %.1f s", what, time.perf_counter() - start)


def step_key(config: dict, model: str, pair: str) -> str:
    """What a kept step's rows depend on (measure/steps.py): the sections this job measures with."""
    return steps.fingerprint(config["study_b"]["models"], config["backend_flags"], config["seed"], config["device"],
                             model, pair)


def run_job(config: dict, model: str, pair: str, run, log: logging.Logger,
            store: steps.StepStore | None = None) -> dict[str, list[dict]]:
    """Rows of every table in JOB_TABLES for one (model, pair), each with run.run_id. With a store, each step's
    rows are kept as it completes, and steps an interrupted attempt completed are taken back, not measured.

    Steps 1-3 run once per setting (batch size × numerics × memory format, vision_models.settings), the study's
    setting (the first) last; then step 4 for every setting, the study's first, on the model its steps compiled
    (the others compile theirs again: later settings' compiles reset dynamo). Step 4's profiled runs give the
    device-busy fraction of every setting."""
    out: dict[str, list[dict]] = {name: [] for name in JOB_TABLES}
    every = vm.settings(config, pair)
    jobs = {}
    for setting in [*every[1:], every[0]]:
        lcase = layer_case(config, model, pair, setting)
        # phases of the study's setting keep their names; the others' are prefixed with the setting
        srun = run if setting == every[0] else PrefixedRun(run, f"{_label(lcase.columns(lcase.compiled))}/")
        with nx.applied(setting.numerics), nx.autocast(setting.numerics, vm.run_device(lcase, config)):
            jobs[setting] = (lcase, srun,
                             _setting_steps(config, model, pair, setting, lcase, srun, log, out,
                                            store, _step_prefix(setting, every, lcase)))
    for setting in every:
        lcase, srun, loaded = jobs.pop(setting)
        if setting != every[0]:      # compiled before a later setting's dynamo reset: again, in phases of its own
            srun = PrefixedRun(run, f"{srun.prefix}timing-methods/")
            if loaded is not None:
                loaded.whole = loaded.units = None
        label = _label(lcase.columns(lcase.compiled))
        with nx.applied(setting.numerics), nx.autocast(setting.numerics, vm.run_device(lcase, config)):
            out["vision_timing_methods"] += _kept(
                store, log, f"{model} on {pair} at {label}: timing methods",
                f"{_step_prefix(setting, every, lcase)}timing-methods",
                lambda: {"vision_timing_methods": timing_methods.timing_methods(lcase, config, srun, loaded)},
            )["vision_timing_methods"]
        del loaded
    _stamp(out, run.run_id)
    for b in out["vision_builds"]:
        log.info("%s %s %s %s %s %s: %s, first call %s ms, %s graphs, %s graph breaks, Inductor cache %s hits %s "
                 "misses %s", model, _label(b), b["step"], b["configuration"], b["mode"], b["variant"], b["status"],
                 b["first_call_ms"], b["graphs"], b["graph_breaks"], b["cache_hits"], b["cache_misses"],
                 b["message"] or "")
    return out


def _label(row: dict) -> str:
    return f"batch {row['batch_size']} {row['numerics']} {row['memory_format']}"


def _step_prefix(setting: vm.Setting, every: list[vm.Setting], lcase: vm.Case) -> str:
    """Kept steps' names, like phase names: the study's setting's plain, the others' prefixed with the setting."""
    return "" if setting == every[0] else _label(lcase.columns(lcase.compiled)).replace(" ", "-") + "."


def _kept(store: steps.StepStore | None, log: logging.Logger, what: str, name: str, measure):
    """One step's rows by table: measured now (and kept, with a store), or kept by an interrupted attempt."""
    with _step(log, what):
        return measure() if store is None else store.step(name, measure)


def _setting_steps(config: dict, model: str, pair: str, setting: vm.Setting, lcase: vm.Case, run,
                   log: logging.Logger, out: dict[str, list[dict]],
                   store: steps.StepStore | None, prefix: str) -> vm.Loaded | None:
    """Steps 1-3 for one setting, their rows appended to `out`; the Loaded they shared (None: not run here)."""
    section = config["study_b"]["models"]
    label = _label(lcase.columns(lcase.compiled))
    what = f"{model} on {pair} at {label}"
    loaded = vm.load_case(lcase) if vm.not_run_reason(lcase, config) is None else None

    def layer_step():
        rows = layers.layer_times(lcase, config, run, loaded, log)
        _stamp({"rows": rows}, run.run_id)
        return {"vision_layer_times": rows}

    layer_rows = _kept(store, log, f"{what}: layer times", f"{prefix}layers", layer_step)["vision_layer_times"]
    out["vision_layer_times"] += layer_rows

    stats = section["bootstrap"]
    oracle_rows = vision_summary.oracle_rows(
        tables.frame("vision_layer_times", layer_rows), stats["resamples"], stats["confidence"],
        config["seed"], section["oracles"]["max_exhaustive_blocks"])
    _stamp({"rows": oracle_rows}, run.run_id)
    out["vision_oracles"] += oracle_rows
    for r in oracle_rows:
        log.info("%s %s: choice %s predicted %s ms (speedup %s), exhaustive agrees: %s", what, r["oracle"],
                 r["choice"], r["predicted_ms"], r["predicted_speedup"], r["dp_matches_exhaustive"])
        if r["dp_matches_exhaustive"] is False:   # a bug in the optimiser, shown in the table and the report
            log.error("%s: the dynamic programme (%s ms) missed the exhaustive optimum (%s ms, %s) of its own "
                      "cost model", what, r["predicted_ms"], r["exhaustive_ms"], r["exhaustive_choice"])

    reason = vm.not_run_reason(lcase, config)
    with _step(log, f"{what}: end to end and selective compilation, interleaved over invocations"):
        if reason is not None:
            done = vision_protocol.not_run_rows(config, model, pair, setting, reason)
        else:
            chosen = _chosen(oracle_rows, len(loaded.parts))
            records = vision_protocol.measure(config, model, pair, setting,
                                              {v: c for v, (c, _) in chosen.items()} if chosen else None,
                                              store, prefix, log)
            done = vision_protocol.rows(config, model, pair, setting, records, chosen, len(loaded.parts))
    for table in ("vision_e2e", "vision_selective", "vision_builds", "vision_profile"):
        out[table] += done[table]
    return loaded


def _chosen(oracle_rows: list[dict], n: int) -> dict[str, tuple[str, float | None]] | None:
    """Selective variant -> (choice, predicted_ms) from this setting's oracle rows; None where they chose nothing."""
    frame = tables.frame("vision_oracles", oracle_rows)
    if frame.filter(pl.col("choice").is_not_null()).is_empty():
        return None
    return {v: c for v, c in selective.choices_from_oracles(frame, n).items() if v in selective.VARIANTS}


def _stamp(out: dict[str, list[dict]], run_id: str) -> None:
    for rows in out.values():
        for row in rows:
            row.setdefault("run_id", run_id)
