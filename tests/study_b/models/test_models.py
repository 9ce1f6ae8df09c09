"""Study B vision-model jobs on the CPU: rows that say why they did not run, the whole chain of jobs on a small
model (dynamo's eager backend stands in for Inductor, to keep the test fast; the smoke config runs Inductor),
oracles from hand-made layer rows with a known answer, and the refusal of recompiles in timed loops."""
import copy
import functools
import inspect
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

from abstraction_cost import config as config_module
from abstraction_cost import tables
from abstraction_cost.compile import inductor_env
from abstraction_cost.measure.run import measured_run
from abstraction_cost.models import cuda_graphs
from abstraction_cost.measure.steps import StepStore
from abstraction_cost.study_b import configurations as cfgs
from abstraction_cost.study_b import compile_cache
from abstraction_cost.study_b.blocks import experiments, registry
from abstraction_cost.study_b.models import (layers, selective, timing_methods, job as vision_job,
                                             protocol as vision_protocol, summary as vision_summary)
from abstraction_cost.study_b.models import vision as vm
from abstraction_cost.study_b.models.oracles import CostModel, dynamic_programme
from tests.fixtures.repository import REPO

ROOT = REPO


PROBED = {"memory_formats": ["contiguous", "channels_last"]}   # a model's warm-up of four tasks: two settings, each
                                                               # compiled whole and by blocks


def smoke_config(**models_overrides):
    config = copy.deepcopy(config_module.load(ROOT / "config" / "smoke.yaml"))
    config["study_b"]["models"].update(models_overrides)
    config["study_b"]["models"]["timing"].update(warmup=1, rounds=2, repeats_per_round=2, inputs=2)
    config["study_b"]["models"]["timing_methods"].update(calls=2)
    config["study_b"]["models"]["bootstrap"].update(resamples=50)
    config["study_b"]["models"]["protocol"] = dict(invocations=1, max_invocations=1, blocks=2, block_ms=5.0,
                                                   min_calls=2, warmup_max=6)
    return config


@pytest.fixture
def eager_backend(monkeypatch):
    monkeypatch.setattr(vm, "BACKEND", "eager")


def test_smoke_config_runs_a_model_on_the_cpu_pair():
    section = config_module.load(ROOT / "config" / "smoke.yaml")["study_b"]["models"]
    assert section["models"]["cpu"] and not section["require_gpu"]
    for name in ("gpu-smoke", "config", "paper"):
        config_module.load(ROOT / "config" / f"{name}.yaml")   # every config validates


def test_unknown_key_is_named():
    config = smoke_config()
    config["study_b"]["models"]["timing"]["round"] = 3
    with pytest.raises(config_module.ConfigError, match=r"study_b\.models\.timing.*round"):
        config_module.validate(config)


def test_compile_cache_tasks_put_the_biggest_compiles_first_and_skip_what_cannot_run(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    config = smoke_config(models={"cpu": ["alexnet", "densenet121"], "gpu": ["resnet50"]},
                          modes=["default", "reduce-overhead"])
    todo, skipped = compile_cache.tasks(config)
    vision = [(t["name"], t["mode"], t["what"]) for t in todo if t["study"] == "models"]
    assert vision == [("densenet121", "default", "whole"), ("densenet121", "default", "blocks"),
                      ("alexnet", "default", "whole"), ("alexnet", "default", "blocks")]
    assert todo[0]["name"] == "densenet121" and todo[-1]["name"] in ("conv_ablation", "matmul")
    # every block experiment of the smoke config runs on the cpu pair in mode default, one task each
    assert {(t["name"], t["pair"], t["mode"]) for t in todo if t["study"] == "blocks"} == {
        (name, "cpu", "default") for name in registry.EXPERIMENTS}
    assert {(t["name"], t["pair"], t["mode"]) for t in skipped if t["study"] == "models"} == {
        ("densenet121", "cpu", "reduce-overhead"), ("alexnet", "cpu", "reduce-overhead"),
        ("resnet50", "gpu", "default"), ("resnet50", "gpu", "reduce-overhead")}
    assert {(t["name"], t["pair"], t["mode"]) for t in skipped if t["study"] == "blocks"} == {
        ("matmul", "cpu", "reduce-overhead"), ("matmul", "gpu", "default"), ("matmul", "gpu", "reduce-overhead")}
    assert all(t["reason"] for t in skipped)


def test_compile_cache_workers_run_torch_with_the_timing_jobs_thread_count():
    # Snakemake runs a timing job (no `threads:`) with OMP_NUM_THREADS=1; Inductor's cache key includes it
    assert inductor_env.job_thread_env()["OMP_NUM_THREADS"] == "1"


_CONFIGURE = """
import json, os, sys
from abstraction_cost.compile import inductor_env
path = inductor_env.configure({"study_b": {"fresh_compile_cache": %s}}, %r)
import torch._inductor.config as c
print(json.dumps([path, os.environ.get("TORCHINDUCTOR_CACHE_DIR"), os.environ.get("TRITON_CACHE_DIR"),
                  c.compile_threads, path is not None and os.listdir(path)]))
try:
    inductor_env.configure({"study_b": {"fresh_compile_cache": False}}, "x")
except RuntimeError as err:
    print(err)
"""


def _configure_in_a_fresh_process(fresh: bool, shared_dir: str | None) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", _CONFIGURE % (fresh, shared_dir)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=True)
    return proc.stdout.strip().splitlines()


def test_jobs_compile_in_process_from_the_warm_cache(tmp_path):
    shared = str(tmp_path / "cache")
    out, refused = _configure_in_a_fresh_process(False, shared)
    assert json.loads(out) == [shared, shared, os.path.join(shared, "triton"), 1, []]
    assert "before torch is imported" in refused


def test_the_warm_up_probes_and_stops_itself_where_a_job_would_miss(tmp_path, monkeypatch):
    """The probe's second compile (a process set up as a job is) misses the cache: the task compiling beside the
    probe is stopped and listed as skipped, and the jobs are told to compile cold."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    calls = []

    def worker(config, task, env, stop=None):
        if stop is not None:   # the rest of the warm-up, compiling beside the probe until the probe stops it
            assert stop.wait(30)
            return {**task, "status": compile_cache.STOPPED, "message": None, "seconds": 0.1}
        calls.append(env["TORCHINDUCTOR_COMPILE_THREADS"])
        return {**task, "status": "ok", "message": None, "seconds": 0.1, "cache_hits": 0, "cache_misses": 3}

    monkeypatch.setattr(compile_cache, "_in_worker", worker)
    manifest = compile_cache.warm(smoke_config(**PROBED), str(tmp_path / "cache"), threads=4,
                                  job={"study": "models", "name": "squeezenet1_1", "pair": "cpu"})
    assert calls == ["1", "1"]   # a warm-up worker (sharing the threads with the rest's two), then a job-like one
    assert manifest["usable"] is False and "missed the cache" in manifest["reason"]
    assert len(manifest["tasks"]) == 1
    assert sorted(t["what"] for t in manifest["skipped"] if "cannot be hit" in t["reason"]) == ["blocks", "whole",
                                                                                                 "whole"]


def test_the_rest_of_a_warm_up_compiles_beside_its_probe(tmp_path, monkeypatch):
    """Invariant: a warm-up takes the longer of its probe and its other tasks, not their sum (gpu-smoke's vision
    warm-ups took 80-100 s in sequence, gating their jobs: docs/results/2026-11-27-h200x2-gpu-smoke-long-places.md).
    The probe's first compile here waits for the other task to have started; in sequence it never would."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    other_started = threading.Event()

    def worker(config, task, env, stop=None):
        if stop is not None:
            other_started.set()
        elif env["TORCHINDUCTOR_COMPILE_THREADS"] != "1":   # the probe's first compile
            assert other_started.wait(5), "the rest of the warm-up waited for the probe"
        return {**task, "status": "ok", "message": None, "seconds": 0.1, "cache_hits": 1, "cache_misses": 0}

    monkeypatch.setattr(compile_cache, "_in_worker", worker)
    manifest = compile_cache.warm(smoke_config(**PROBED), str(tmp_path / "cache"), threads=4,
                                  job={"study": "models", "name": "squeezenet1_1", "pair": "cpu"})
    assert manifest["usable"] is True and len(manifest["tasks"]) == 4 and not manifest["skipped"]


def test_a_stopped_worker_process_is_killed_and_says_so(tmp_path, monkeypatch):
    """_in_worker's own process: a stop set while it compiles kills it within a poll and returns STOPPED."""
    sleeper = tmp_path / "sleeper"
    sleeper.write_text("#!/bin/sh\nexec sleep 120\n")   # stands in for the interpreter: a task that never ends
    sleeper.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(sleeper))
    stop = threading.Event()
    timer = threading.Timer(1.0, stop.set)
    timer.start()
    started = time.perf_counter()
    result = compile_cache._in_worker({}, {"name": "x"}, {**os.environ}, stop)
    assert result["status"] == compile_cache.STOPPED and time.perf_counter() - started < 10


def test_a_warm_up_of_one_timing_job_compiles_only_that_jobs_graphs(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    calls = []

    def worker(config, task, env, stop=None):
        calls.append((task["study"], task["name"], task["pair"], task["mode"], task["what"]))
        return {**task, "status": "ok", "message": None, "seconds": 0.1, "cache_hits": 1, "cache_misses": 0}

    monkeypatch.setattr(compile_cache, "_in_worker", worker)
    job = {"study": "blocks", "name": "matmul", "pair": "cpu", "mode": "default"}
    manifest = compile_cache.warm(smoke_config(), str(tmp_path / "cache"), threads=2, job=job)
    assert calls == [("blocks", "matmul", "cpu", "default", "cases")]   # one task: compiled once, not probed
    assert manifest["usable"] is None and [t["name"] for t in manifest["tasks"]] == ["matmul"]
    calls.clear()
    manifest = compile_cache.warm(smoke_config(), str(tmp_path / "cache"), threads=2,
                                  job={"study": "models", "name": "squeezenet1_1", "pair": "cpu"})
    assert sorted({c[1] for c in calls}) == ["squeezenet1_1"] and len(calls) == 2   # two tasks: each once, no probe
    assert manifest["usable"] is None
    calls.clear()
    manifest = compile_cache.warm(smoke_config(**PROBED), str(tmp_path / "cache"), threads=2,
                                  job={"study": "models", "name": "squeezenet1_1", "pair": "cpu"})
    assert len(calls) == 5 and manifest["usable"] is True   # four tasks: the probe's two, the other three


def test_compile_cache_tasks_cover_every_setting(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    config = smoke_config(models={"cpu": ["alexnet"], "gpu": []}, batch_size=[1, 8], numerics=["fp32", "tf32"])
    todo, _ = compile_cache.tasks(config)
    assert {tuple(t["setting"]) for t in todo if t["study"] == "models"} == {
        (b, n, "contiguous") for b in (1, 8) for n in ("fp32", "tf32")}


def test_a_fresh_compile_cache_is_empty_and_keeps_the_default_compile_workers():
    out, _ = _configure_in_a_fresh_process(True, None)
    path, cache_dir, _, threads, listing = json.loads(out)
    assert cache_dir == path and listing == []
    assert threads > 1 or os.cpu_count() == 1
    assert not os.path.exists(path), "the fresh cache is removed when the job's process ends"


def test_compile_cases_compiles_what_the_timing_job_compiles(monkeypatch):
    from torch._dynamo.utils import counters

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(experiments, "prepare", functools.partial(cfgs.prepare, backend="eager"))
    config = smoke_config()
    before = counters["frames"]["total"]
    assert experiments.compile_cases("conv_blocks", config, "cpu", "default") == 2   # n_max: 2
    assert counters["frames"]["total"] - before == 2
    with pytest.raises(ValueError, match="cannot run here"):
        experiments.compile_cases("matmul", config, "gpu", "default")


def test_case_names_the_config_key_at_fault():
    with pytest.raises(ValueError, match=r"study_b\.models\.models\.cpu"):
        vm.case_from_config(smoke_config(), "densenet121", "cpu", "default")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the rows written on a machine without a GPU")
def test_gpu_pair_without_gpu_is_not_run_in_every_table(tmp_path):
    config = smoke_config()
    case = vm.case_from_config(config, "squeezenet1_1", "gpu", "default")
    with measured_run(config, rule="t", job={}, env_path=tmp_path / "env.parquet",
                      device=vm.run_device(case, config)) as run:
        both = vision_protocol.not_run_rows(config, "squeezenet1_1", "gpu", vm.settings(config, "gpu")[0],
                                            vm.not_run_reason(case, config))
        timing = timing_methods.timing_methods(case, config, run, None)
        layer_rows = layers.layer_times(case, config, run, None)
        oracle_rows = vision_summary.oracle_rows(tables.frame("vision_layer_times", _with_id(layer_rows)),
                                                 50, 0.95, 0, 20)
    e2e = both["vision_e2e"]
    for name, rows in [("vision_e2e", e2e), ("vision_builds", both["vision_builds"]),
                       ("vision_timing_methods", timing), ("vision_layer_times", layer_rows),
                       ("vision_selective", both["vision_selective"])]:
        df = tables.frame(name, _with_id(rows))
        assert set(df["status"]) == {"not_run"}, name
        assert df["message"].str.contains("configuration .triton. needs").all(), name
    assert {r["variant"] for r in e2e} == {"eager", "compiled", "eager_channels_last", "eager_cuda_graphs",
                                          "eager_in_process"}
    assert all(r["choice"] is None for r in oracle_rows)


def test_require_gpu_makes_the_cpu_pair_not_run_without_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    config = smoke_config(require_gpu=True)
    case = vm.case_from_config(config, "squeezenet1_1", "cpu", "default")
    assert "study_b.models.require_gpu" in vm.not_run_reason(case, config)


def test_cuda_graph_mode_on_the_cpu_is_not_run():
    config = smoke_config()
    case = vm.case_from_config(config, "squeezenet1_1", "cpu", "reduce-overhead")
    assert "CUDA graphs" in vm.not_run_reason(case, config)


def _with_id(rows, run_id="r0"):
    return [{**r, "run_id": r.get("run_id") or run_id} for r in rows]


def test_the_whole_chain_on_a_small_model(tmp_path, eager_backend, caplog):
    caplog.set_level(logging.INFO, logger="abstraction_cost.study_b.models.protocol")
    config = smoke_config()
    with measured_run(config, rule="t", job={}, env_path=tmp_path / "env.parquet") as run:
        out = vision_job.run_job(config, "squeezenet1_1", "cpu", run, logging.getLogger("t"))
    assert {r["run_id"] for rows in out.values() for r in rows} == {run.run_id}
    e2e, builds, timing, layer_rows = (out[n] for n in ("vision_e2e", "vision_builds", "vision_timing_methods",
                                                        "vision_layer_times"))
    e2e_df = tables.frame("vision_e2e", _with_id(e2e))
    ok = e2e_df.filter(pl.col("status") == "ok")
    assert set(ok["variant"]) == {"eager", "compiled", "eager_channels_last", "eager_in_process"}
    assert (ok["time_ms"] > 0).all() and set(ok["invocation"]) == {0}
    # every variant took both turns, eager in the clean process, the compiled model and eager after it in the other
    turns = ok.group_by("variant").agg(pl.col("round").unique().sort(), pl.col("process").first())
    assert all(t.to_list() == [0, 1] for t in turns["round"])
    assert dict(turns.select("variant", "process").iter_rows()) == {
        "eager": "clean", "eager_channels_last": "clean", "compiled": "compiled", "eager_in_process": "compiled"}
    assert (ok["warmup_calls"] >= 2).all()
    assert e2e_df.filter(pl.col("variant") == "eager_cuda_graphs")["status"].to_list() == ["not_run"]
    built = {r["variant"]: r for r in builds if r["step"] == "e2e"}
    assert built["compiled"]["graphs"] >= 1 and built["compiled"]["recompiles"] == 0

    timing_df = tables.frame("vision_timing_methods", _with_id(timing))
    assert set(timing_df["status"]) == {"ok"}
    assert set(timing_df["timing"]) == {"pure", "sync", "timed", "timed_sync"}
    assert set(timing_df.filter(pl.col("metric") == "arr_sum")["timing"]) == {"timed", "timed_sync"}
    assert set(timing_df["profiled"]) == {True, False}

    layer_df = tables.frame("vision_layer_times", _with_id(layer_rows))
    assert set(layer_df["status"]) == {"ok"}
    n = 14
    prefixes = layer_df.filter(pl.col("measure") == "prefix")
    assert sorted(set(prefixes["block"])) == list(range(n + 1))
    assert sorted(set(layer_df.filter(pl.col("measure") == "mixed_to_eager")["block"])) == list(range(1, n))

    oracle_df = tables.frame("vision_oracles", out["vision_oracles"])
    dp = oracle_df.filter(pl.col("oracle") == "dp").row(0, named=True)
    assert len(dp["choice"]) == n and dp["dp_matches_exhaustive"] is True
    assert dp["predicted_ms_low"] <= dp["predicted_ms"] <= dp["predicted_ms_high"]

    sel_df = tables.frame("vision_selective", out["vision_selective"])
    assert set(sel_df["status"]) == {"ok"}, sel_df.filter(pl.col("status") != "ok")["message"].to_list()
    assert set(sel_df["variant"]) == {"eager", "compiled", "all_blocks", "dp_blocks", "dp_segments", "btr_blocks",
                                      "eager_in_process"}
    assert sel_df.filter(pl.col("variant") == "dp_blocks")["choice"][0] == dp["choice"]
    # the selective step's eager and compiled are the end-to-end step's: one measurement, the same numbers
    for variant in ("eager", "compiled"):
        assert sorted(sel_df.filter(pl.col("variant") == variant)["time_ms"]) == sorted(
            ok.filter(pl.col("variant") == variant)["time_ms"])
    # the blocks were compiled once in the worker, with the whole model: the block-wise choices compile nothing new
    sel_builds = {r["variant"]: r for r in builds if r["step"] == "selective"}
    assert [sel_builds[v]["graphs"] for v in ("dp_blocks", "all_blocks")] == [0, 0]

    summary = vision_summary.selective_summary_rows(sel_df, oracle_df, 50, 0.95, 0)
    tables.frame("vision_selective_summary", summary)
    speedups = tables.frame("vision_speedups", vision_summary.speedup_rows(e2e_df, 50, 0.95, 0))
    measured = speedups.filter(pl.col("variant") != "eager_cuda_graphs")      # not_run on the CPU
    assert set(measured["status"]) == {"ok"} and (measured["invocations"] == 1).all()
    baselines = tables.frame("vision_eager_baselines", vision_summary.eager_baseline_rows(
        {"vision_e2e": e2e_df, "vision_selective": sel_df, "vision_layer_times": layer_df,
         "vision_timing_methods": timing_df}, 50, 0.95, 0))
    by_step = {r["step"]: r for r in baselines.iter_rows(named=True)}
    assert {s: r["process"] for s, r in by_step.items()} == {
        "e2e default": "clean", "e2e in-process default": "compiled", "selective": "clean", "layers": "job",
        "timing_sync": "job"}
    assert by_step["selective"]["ratio_to_e2e"] == pytest.approx(1.0)
    tables.frame("vision_timing_summary", vision_summary.timing_summary_rows(timing_df, 50, 0.95, 0))
    layer_summary = tables.frame("vision_layer_summary",
                                 vision_summary.layer_summary_rows(layer_df, oracle_df, 50, 0.95, 0))
    assert layer_summary.height == 2 * n
    # where an invocation's time before its turns went: each worker's start, its prepare and its longest build
    line = next(r.getMessage() for r in caplog.records if "workers up and prepared" in r.getMessage())
    for key in ("clean", "compiled:default"):
        assert re.search(rf"{key}: up \d+\.\d s, ready \d+\.\d s \(longest build \w+ \d+\.\d s, warm-ups", line), line


def test_selective_builds_compute_the_models_forward(eager_backend):
    config = smoke_config()
    case = vm.case_from_config(config, "squeezenet1_1", "cpu", "default")
    model, parts = vm.load(case, torch.device("cpu"))
    (x,) = vm.make_inputs(case, torch.device("cpu"))[0]
    choice = tuple([0, 1, 1, 0, 1] + [0] * 8 + [1])
    assert selective.segments(choice) == [(0, 1, False), (1, 3, True), (3, 4, False), (4, 5, True),
                                          (5, 13, False), (13, 14, True)]
    with torch.no_grad():
        want = model(x)
        for construction in ("blocks", "segments"):
            got = selective.build(parts, choice, construction, "default", "t")(x)
            torch.testing.assert_close(got, want)


def _synthetic_layer_rows(truth: CostModel, empty_ms=0.01, rounds=3, repeats=2):
    """Layer rows whose medians are exactly those the cost model implies (noise-free)."""
    case = vm.Case("alexnet", "gpu", "default", 1, 64, 0, 0, rounds, repeats, 1, False)
    n = truth.n
    pe = empty_ms + np.concatenate([[0], np.cumsum(truth.eager)])
    pc = empty_ms + np.concatenate([[0], np.cumsum(truth.compiled)])
    rows = []

    def add(configuration, measure, block, t):
        for r in range(rounds):
            for k in range(repeats):
                rows.append({**case.columns(configuration), "measure": measure, "block": block,
                             "block_name": f"b{block}", "block_kind": "Conv2d", "round": r, "repeat": k,
                             "time_ms": float(t), "status": "ok", "message": None, "run_id": "r1"})
    for i in range(n):
        add("cuda", "timer", i, truth.eager[i])
        add("triton", "timer", i, truth.compiled[i])
    for k in range(n + 1):
        add("cuda", "prefix", k, pe[k])
        add("triton", "prefix", k, pc[k])
    for i in range(1, n):
        add("triton", "mixed_to_compiled", i, pe[i] + truth.compiled[i] + truth.to_compiled[i])
        add("triton", "mixed_to_eager", i, pc[i] + truth.eager[i] + truth.to_eager[i])
    return tables.frame("vision_layer_times", rows)


def test_oracles_from_layer_rows_with_a_known_answer():
    truth = CostModel(np.array([10.0, 10.0, 10.0, 10.0]), np.array([9.0, 11.0, 9.0, 5.0]),
                      np.array([0.0, 1.5, 1.5, 1.5]), np.array([0.0, 0.5, 0.5, 0.5]))
    rows = {r["oracle"]: r for r in vision_summary.oracle_rows(_synthetic_layer_rows(truth), 20, 0.95, 0, 20)}
    assert rows["btr_timers"]["choice"] == "cecc"
    assert rows["btr_timers"]["predicted_ms"] == pytest.approx(9 + 10 + 9 + 5)
    assert rows["btr_timers"]["predicted_speedup"] == pytest.approx(40 / 33)
    assert rows["btr_timers"]["study_speedup"] == pytest.approx(1.043)      # Table 5.1, AlexNet
    best = dynamic_programme(truth)
    assert rows["dp"]["choice"] == "cccc" == "".join("c" if s else "e" for s in best.choice)
    assert rows["dp"]["predicted_ms"] == pytest.approx(34 + 0.01)         # + the empty call
    assert rows["dp"]["reference_ms"] == pytest.approx(40 + 0.01)
    assert rows["dp"]["dp_matches_exhaustive"] is True
    # noise-free rows: every bootstrap resample gives the same answer
    assert rows["dp"]["predicted_speedup_low"] == pytest.approx(rows["dp"]["predicted_speedup_high"])
    # best of two runs by subtraction ignores the two switches its choice pays
    assert rows["btr_subtraction"]["switch_model_ms"] == pytest.approx(33 + 0.5 + 1.5 + 0.01)


def test_incomplete_layer_rows_give_oracle_rows_without_a_choice():
    truth = CostModel.without_switch_costs([1.0, 2.0], [2.0, 1.0])
    df = _synthetic_layer_rows(truth).filter(~((pl.col("measure") == "prefix") & (pl.col("block") == 2)))
    rows = vision_summary.oracle_rows(df, 20, 0.95, 0, 20)
    assert [r["choice"] for r in rows] == [None, None, None]


def test_a_compile_inside_a_timed_loop_is_refused():
    f = torch.compile(lambda x: x.relu() + 1, backend="eager", dynamic=False)
    f(torch.ones(2))
    with vm.refuse_compilation("a test loop"):
        f(torch.ones(2))          # cached: allowed
    with pytest.raises(cfgs.Recompiled, match="a test loop"):
        with vm.refuse_compilation("a test loop"):
            f(torch.ones(3))      # new shape: compiles


def test_compiled_units_keep_their_own_cache(eager_backend):
    """Seventeen instances of one class compiled as units: each its own code, none falls back to eager."""
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    units = [vm.compile_unit(torch.nn.ReLU(), "default", f"relu{i}") for i in range(17)]
    x = torch.randn(4)
    for u in units:
        u(x)
    assert counters["frames"]["total"] == 17 and counters["stats"]["unique_graphs"] == 17


def test_compiled_units_are_functions_with_a_source_file_and_code_of_their_own():
    """torch < 2.13 routes functions without a source file (exec'd ones) through one shared wrapper frame,
    whose cache fills after eight (pytorch#124269): units must name a real file and own their code objects."""
    fns = [vm.compile_unit(torch.nn.ReLU(), "default", f"relu{i}")._torchdynamo_orig_callable for i in range(3)]
    assert all(inspect.getsourcefile(fn) == inspect.getsourcefile(vm) for fn in fns)
    assert len({id(fn.__code__) for fn in fns}) == 3 and fns[0].__code__.co_name.endswith("_relu0")


def test_a_block_that_compiles_no_graph_is_refused(monkeypatch):
    config = smoke_config()
    case = vm.case_from_config(config, "squeezenet1_1", "cpu", "default")
    loaded = vm.load_case(case)
    monkeypatch.setattr(vm, "compile_unit", lambda module, mode, label: module)   # runs eager: no graph
    with torch.no_grad(), pytest.raises(vm.NotCompiled, match="squeezenet1_1 block"):
        vm.compile_units(loaded, case)


def test_selective_expects_a_graph_for_every_new_compiled_segment():
    choice = (1, 1, 0, 1, 0, 0, 1)   # c c e c e e c
    assert selective.new_graphs(choice, "segments", None) == 3
    assert selective.new_graphs(choice, "blocks", None) == 4
    assert selective.new_graphs(choice, "blocks", [object()] * 7) == 0   # the job's units, compiled already


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_baselines_compute_the_forward_and_every_step_runs(tmp_path):
    config = smoke_config(models={"gpu": ["squeezenet1_1"]})
    config["device"] = "cuda"
    case = vm.case_from_config(config, "squeezenet1_1", "gpu", "default")
    device = vm.device_of(case)
    with torch.no_grad():
        model, _ = vm.load(case, device)
        (x,) = vm.make_inputs(case, device)[0]
        want = model(x)
        torch.testing.assert_close(cuda_graphs.Graphed(model, x)(x.clone()), want)
        # channels-last convolutions run other cuDNN kernels, which sum in another order: measured on an H100,
        # logits of SqueezeNet differ by up to 2.8e-4 (fp32, TF32 off)
        torch.testing.assert_close(vm.channels_last(model)(x), want, rtol=1e-3, atol=1e-3)
    with measured_run(config, rule="t", job={}, env_path=tmp_path / "env.parquet", device=device) as run:
        out = vision_job.run_job(config, "squeezenet1_1", "gpu", run, logging.getLogger("t"))
    for name in ("vision_e2e", "vision_timing_methods", "vision_layer_times", "vision_selective"):
        df = tables.frame(name, out[name])
        assert set(df["status"]) == {"ok"}, (name, df.filter(pl.col("status") != "ok")["message"].to_list())
    e2e = tables.frame("vision_e2e", out["vision_e2e"])
    assert set(e2e["variant"]) == {"eager", "compiled", "eager_channels_last", "eager_cuda_graphs"}
    builds = [r for r in out["vision_builds"] if r["step"] == "e2e"]
    assert {r["variant"]: r["alloc_peak_mib"] is not None for r in builds} == dict.fromkeys(set(e2e["variant"]), True)
    assert {r["oracle"] for r in out["vision_oracles"] if r["choice"]} == {"btr_timers", "btr_subtraction", "dp"}
    # the profiled pure calls give the device-busy fraction of eager and compiled
    timing = tables.frame("vision_timing_methods", out["vision_timing_methods"])
    busy = vision_summary.device_busy(timing)
    assert len(busy) == 2 and all(0 < v <= 1.5 for v in busy.values()), busy


def test_a_protocol_key_that_is_not_a_positive_number_is_refused_naming_it():
    for key, value in (("invocations", 0), ("block_ms", -1.0), ("precision", 0), ("min_calls", 1.5)):
        config = smoke_config()
        config["study_b"]["models"]["protocol"][key] = value
        with pytest.raises(config_module.ConfigError, match=rf"study_b\.models\.protocol\.{key}"):
            config_module.validate(config)
    config = smoke_config()
    config["study_b"]["models"]["protocol"]["rounds"] = 3
    with pytest.raises(config_module.ConfigError, match=r"study_b\.models\.protocol.*rounds"):
        config_module.validate(config)
    with pytest.raises(ValueError, match=r"study_b\.models\.protocol\.blocks"):
        vision_protocol.Protocol.from_config({"protocol": {"blocks": 0}})


def test_a_block_fills_its_time_and_the_invocation_its_minimum_count():
    p = vision_protocol.Protocol.from_config({"protocol": {"blocks": 4, "block_ms": 50.0, "min_calls": 20}})
    assert p.calls_per_block(0.5) == 100      # a fast call: the time decides
    assert p.calls_per_block(40.0) == 5       # a slow call: at least min_calls over the blocks
    assert p.max_invocations >= p.invocations


def test_invocations_go_on_while_a_variants_medians_are_imprecise():
    def records(*medians):
        return [[{"worker": "clean", "variant": "eager", "status": "ok", "blocks": [[m, m]]}] for m in medians]
    assert vision_protocol.imprecise(records(1.0), 0.05)               # one invocation pins nothing
    assert not vision_protocol.imprecise(records(1.0, 1.01, 0.99), 0.05)
    assert vision_protocol.imprecise(records(1.0, 1.5, 0.7), 0.05)


def test_a_worker_killed_mid_run_leaves_rows_with_its_status_and_a_resumed_job_keeps_its_invocations(
        tmp_path, eager_backend, monkeypatch):
    config = smoke_config()
    config["study_b"]["models"].update(baselines=[], modes=["default"])
    config["study_b"]["models"]["protocol"].update(invocations=2, max_invocations=2)
    setting = vm.settings(config, "cpu")[0]
    monkeypatch.setenv("AC_VISION_WORKER_CRASH", "compiled:compiled:1")
    store = StepStore(tmp_path / "steps", "k")
    records = vision_protocol.measure(config, "squeezenet1_1", "cpu", setting, None, store, "")
    out = vision_protocol.rows(config, "squeezenet1_1", "cpu", setting, records, None, 14)
    e2e = tables.frame("vision_e2e", _with_id(out["vision_e2e"]))
    compiled = e2e.filter(pl.col("variant") == "compiled")
    assert set(compiled.filter(pl.col("status") == "ok")["invocation"]) == {0}
    failed = compiled.filter(pl.col("status") != "ok").row(0, named=True)
    assert failed["invocation"] == 1 and failed["status"] == "error" and "exit status 3" in failed["message"]
    # the clean worker did not die: eager counts in both invocations
    assert set(e2e.filter(pl.col("variant") == "eager", pl.col("status") == "ok")["invocation"]) == {0, 1}
    speedup = {r["variant"]: r for r in vision_summary.speedup_rows(e2e, 50, 0.95, 0)}["compiled"]
    assert speedup["status"] == "ok" and speedup["invocations"] == 1 and "invocation 1: error" in speedup["message"]
    sel = tables.frame("vision_selective", _with_id(out["vision_selective"]))
    assert set(sel.filter(pl.col("variant") == "dp_blocks")["status"]) == {"missing"}

    # resumed: both invocations are kept, no worker starts
    monkeypatch.setattr(vision_protocol, "sessions", lambda specs, protocol, invs, alone: (r for r in ())
                        if not invs else pytest.fail(f"invocations {invs} measured again"))
    again = vision_protocol.measure(config, "squeezenet1_1", "cpu", setting, None,
                                    StepStore(tmp_path / "steps", "k"), "")
    assert [(r["worker"], r["variant"], r["status"]) for r in again] == [
        (r["worker"], r["variant"], r["status"]) for r in records]


def test_the_drift_sentence_claims_a_slowdown_only_where_the_paired_interval_excludes_one():
    from abstraction_cost.report import study_b_models as sbm
    base = {"model": "resnet50", "pair": "gpu", "mode": "default", "batch_size": 1, "numerics": "fp32",
            "memory_format": "contiguous", "variant": "eager_in_process", "status": "ok"}
    slower = pl.DataFrame([{**base, "speedup": 0.8, "speedup_low": 0.75, "speedup_high": 0.85}])
    assert "1.25× [1.18–1.33], slower" in sbm.drift_finding(slower)
    unclear = pl.DataFrame([{**base, "speedup": 0.98, "speedup_low": 0.9, "speedup_high": 1.05}])
    assert "no measurable difference at this precision" in sbm.drift_finding(unclear)
    assert "not measured" in sbm.drift_finding(unclear.filter(pl.col("status") == "error"))
