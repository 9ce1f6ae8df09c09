"""One job per (model, pair): every step of Study B's vision models in one process (rule vision_model).

Steps, in this order, on one Loaded model (vision_models.py):

Steps 1-4 run for every setting of the job's axes (batch size, numerics, memory format; vision_models.settings)
under that setting's numerics (measure/numerics.py: TF32 flags, and autocast around every call); step 5 runs
for every setting after all of them, so that no profiler has run before any other step's timing.

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
their status; a failure in one step does not stop the next.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager

import torch

from .. import tables
from ..measure import numerics as nx
from ..measure.run import PrefixedRun
from ..tables.study_b_models import JOB_TABLES
from . import layers, selective, timing_methods, vision_summary
from . import vision_models as vm


def layer_case(config: dict, model: str, pair: str, setting: vm.Setting | None = None) -> vm.Case:
    return vm.case_from_config(config, model, pair, config["study_b"]["models"]["layer_mode"], setting)


def run_device(config: dict, model: str, pair: str) -> torch.device:
    return vm.run_device(layer_case(config, model, pair), config)


@contextmanager
def _step(log: logging.Logger, what: str):
    start = time.perf_counter()
    yield
    log.info("%s done in %.1f s", what, time.perf_counter() - start)


def run_job(config: dict, model: str, pair: str, run, log: logging.Logger) -> dict[str, list[dict]]:
    """Rows of every table in JOB_TABLES for one (model, pair), each with run.run_id.

    Steps 1-4 run once per setting (batch size × numerics × memory format, vision_models.settings), the study's
    setting (the first) last; then step 5 for every setting, the study's first, on the model its steps compiled
    (the others compile theirs again: later settings' compiles reset dynamo). Step 5's profiled runs give the
    device-busy fraction of every setting."""
    out: dict[str, list[dict]] = {name: [] for name in JOB_TABLES}
    every = vm.settings(config, pair)
    jobs = {}
    for setting in [*every[1:], every[0]]:
        lcase = layer_case(config, model, pair, setting)
        # phases of the study's setting keep their names; the others' are prefixed with the setting
        srun = run if setting == every[0] else PrefixedRun(run, f"{_label(lcase.columns(lcase.compiled))}/")
        with nx.applied(setting.numerics), nx.autocast(setting.numerics, vm.run_device(lcase, config)):
            jobs[setting] = (lcase, srun, _setting_steps(config, model, pair, setting, lcase, srun, log, out))
    for setting in every:
        lcase, srun, loaded = jobs.pop(setting)
        if setting != every[0]:      # compiled before a later setting's dynamo reset: again, in phases of its own
            srun = PrefixedRun(run, f"{srun.prefix}timing-methods/")
            if loaded is not None:
                loaded.whole = loaded.units = None
        with nx.applied(setting.numerics), nx.autocast(setting.numerics, vm.run_device(lcase, config)), \
                _step(log, f"{model} on {pair} at {_label(lcase.columns(lcase.compiled))}: timing methods"):
            out["vision_timing_methods"] += timing_methods.timing_methods(lcase, config, srun, loaded)
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


def _setting_steps(config: dict, model: str, pair: str, setting: vm.Setting, lcase: vm.Case, run,
                   log: logging.Logger, out: dict[str, list[dict]]) -> vm.Loaded | None:
    """Steps 1-4 for one setting, their rows appended to `out`; the Loaded they shared (None: not run here)."""
    section = config["study_b"]["models"]
    what = f"{model} on {pair} at {_label(lcase.columns(lcase.compiled))}"
    loaded = vm.load_case(lcase) if vm.not_run_reason(lcase, config) is None else None
    for mode in sorted(section["modes"], key=lambda m: m == lcase.mode):   # stable sort: layer mode last
        with _step(log, f"{what}: end to end in mode {mode}"):
            times, builds = vm.end_to_end(vm.case_from_config(config, model, pair, mode, setting), config, run,
                                          loaded)
        out["vision_e2e"] += times
        out["vision_builds"] += [{**b, "step": "e2e"} for b in builds]
    with _step(log, f"{what}: layer times"):
        layer_rows = layers.layer_times(lcase, config, run, loaded, log)
    _stamp({"rows": layer_rows}, run.run_id)
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
    with _step(log, f"{what}: selective compilation"):
        times, builds = selective.selective(lcase, config, tables.frame("vision_oracles", oracle_rows), run,
                                           loaded)
    out["vision_selective"] += times
    out["vision_builds"] += [{**b, "step": "selective"} for b in builds]
    return loaded


def _stamp(out: dict[str, list[dict]], run_id: str) -> None:
    for rows in out.values():
        for row in rows:
            row.setdefault("run_id", run_id)
