"""One job per (model, pair): every step of Study B's vision models in one process (rule vision_model).

Steps, in this order, on one Loaded model (vision_models.py):

1. end to end in every compile mode of study_b.models.modes, the layer mode last: each compile resets dynamo,
   so only the last one's compiled model survives, and the steps below use it;
2. in the layer mode: the per-layer times, with the blocks compiled one by one once
   (vision_models.ensure_compiled);
3. the oracles, computed from this job's layer rows (vision_summary.oracle_rows, as the table vision_oracles);
4. selective compilation of the oracles' choices, built from those same compiled blocks;
5. the timing methods, last: their profiled variants start torch.profiler (CUPTI on the GPU), which may leave
   per-launch overhead behind in the process, so nothing else is timed after them.

One process per (model, pair) rather than one per step, because each process pays torch's import and CUDA's
start-up, and each step would compile the whole model and its blocks again. Steps that fail become rows with
their status; a failure in one step does not stop the next. Each step's rows are kept on disk as it completes
(measure/steps.py), so a job killed after hours resumes at the first step it had not finished.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager

import torch

from .. import tables
from ..measure import steps
from ..tables.study_b_models import JOB_TABLES
from . import layers, selective, timing_methods, vision_summary
from . import vision_models as vm


def layer_case(config: dict, model: str, pair: str) -> vm.Case:
    return vm.case_from_config(config, model, pair, config["study_b"]["models"]["layer_mode"])


def run_device(config: dict, model: str, pair: str) -> torch.device:
    return vm.run_device(layer_case(config, model, pair), config)


@contextmanager
def _step(log: logging.Logger, what: str):
    start = time.perf_counter()
    yield
    log.info("%s done in %.1f s", what, time.perf_counter() - start)


def step_key(config: dict, model: str, pair: str) -> str:
    """What a kept step's rows depend on (measure/steps.py): the sections this job measures with."""
    return steps.fingerprint(config["study_b"]["models"], config["numerics"], config["seed"], config["device"],
                             model, pair)


def run_job(config: dict, model: str, pair: str, run, log: logging.Logger,
            store: steps.StepStore | None = None) -> dict[str, list[dict]]:
    """Rows of every table in JOB_TABLES for one (model, pair), each with run.run_id. With a store, each step's
    rows are kept as it completes, and steps an interrupted attempt completed are taken back, not measured."""
    section = config["study_b"]["models"]
    lcase = layer_case(config, model, pair)
    loaded = vm.load_case(lcase) if vm.not_run_reason(lcase, config) is None else None
    out: dict[str, list[dict]] = {name: [] for name in JOB_TABLES}

    def step(name: str, what: str, measure) -> dict[str, list[dict]]:
        with _step(log, f"{model} on {pair}: {what}"):
            return measure() if store is None else store.step(name, measure)

    def e2e(mode):
        times, builds = vm.end_to_end(vm.case_from_config(config, model, pair, mode), config, run, loaded)
        return {"vision_e2e": times, "vision_builds": [{**b, "step": "e2e"} for b in builds]}

    for mode in sorted(section["modes"], key=lambda m: m == lcase.mode):   # stable sort: layer mode last
        done = step(f"e2e-{mode}", f"end to end in mode {mode}", lambda: e2e(mode))
        out["vision_e2e"] += done["vision_e2e"]
        out["vision_builds"] += done["vision_builds"]
    out["vision_layer_times"] = step("layers", "layer times", lambda: {
        "vision_layer_times": layers.layer_times(lcase, config, run, loaded, log)})["vision_layer_times"]
    _stamp(out, run.run_id)

    stats = section["bootstrap"]
    out["vision_oracles"] = vision_summary.oracle_rows(
        tables.frame("vision_layer_times", out["vision_layer_times"]), stats["resamples"], stats["confidence"],
        config["seed"], section["oracles"]["max_exhaustive_blocks"])
    for r in out["vision_oracles"]:
        log.info("%s %s %s: choice %s predicted %s ms (speedup %s), exhaustive agrees: %s", r["model"], r["pair"],
                 r["oracle"], r["choice"], r["predicted_ms"], r["predicted_speedup"], r["dp_matches_exhaustive"])
        if r["dp_matches_exhaustive"] is False:   # a bug in the optimiser, shown in the table and the report
            log.error("%s: the dynamic programme (%s ms) missed the exhaustive optimum (%s ms, %s) of its own "
                      "cost model", model, r["predicted_ms"], r["exhaustive_ms"], r["exhaustive_choice"])

    def selective_step():
        times, builds = selective.selective(lcase, config, tables.frame("vision_oracles", out["vision_oracles"]),
                                            run, loaded)
        return {"vision_selective": times, "vision_builds": [{**b, "step": "selective"} for b in builds]}

    done = step("selective", "selective compilation", selective_step)
    out["vision_selective"] = done["vision_selective"]
    out["vision_builds"] += done["vision_builds"]
    out["vision_timing_methods"] = step("timing-methods", "timing methods", lambda: {
        "vision_timing_methods": timing_methods.timing_methods(lcase, config, run, loaded)})["vision_timing_methods"]
    _stamp(out, run.run_id)
    for b in out["vision_builds"]:
        log.info("%s %s %s %s %s: %s, first call %s ms, %s graphs, %s graph breaks, Inductor cache %s hits %s "
                 "misses %s", model, b["step"], b["configuration"], b["mode"], b["variant"], b["status"],
                 b["first_call_ms"], b["graphs"], b["graph_breaks"], b["cache_hits"], b["cache_misses"],
                 b["message"] or "")
    return out


def _stamp(out: dict[str, list[dict]], run_id: str) -> None:
    for rows in out.values():
        for row in rows:
            row.setdefault("run_id", run_id)
