"""Study B's compile cache: rule compile_cache fills it, in parallel processes, before any Study B job times
anything; every Study B timing job then compiles from it (inductor_env.configure).

Compilation is mostly single-threaded Python (dynamo, AOT autograd, Inductor's lowering) and dominates the
jobs' wall time, while their timing must run one job at a time. So one warm-up job per timing job (`job`:
of_job), on cores no timing job uses and never beside a job that times on the CPU, compiles what that timing job
will compile, one task per (study, name, pair, mode, what) spread over worker processes:

    study    name                 what     compiles
    models   a vision model       whole    the model compiled whole (vision_models.prepare_whole), each mode
    models   a vision model       blocks   every block alone (vision_models.compile_units), layer mode only
    blocks   a block experiment   cases    every case of that timing job (experiments.compile_cases)

Each worker repeats the jobs' own construction (same model or case, inputs, numerics and torch.compile
arguments) and pickles memory formats as they do (cache_key.py: else each process keyed the same graph apart),
so their graphs hit this cache and a job's compile is a warm one. Segments of selective compilation depend on
the oracles' choice and are compiled by their job.

Whether the jobs can hit the warm-up's entries is measured, not assumed: where a warm-up has at least three tasks,
the cheapest one is compiled by a warm-up worker and then again by a process set up as a timing job is (one
compile thread, the job's thread count), while the other tasks compile beside it (the probe ran first and alone
until the warm-ups of gpu-smoke's two vision models took 80-100 s, the sum of their tasks, which gated those vision
jobs: docs/results/2026-11-27-h200x2-gpu-smoke-long-places.md). If the probe's second compile misses the cache (the
same graph got another key in the job), the tasks still compiling are stopped, since they would cost minutes and
save nothing; the manifest says so (`usable`, `probe`, `skipped`) and the jobs compile cold, in process as always.
With two tasks there is no probe. Invariant: a warm-up ends when its last task does, never later for a check
that cannot save work: with one task beside the probe its verdict comes when that task is about done, while the
probe's second process (a fresh interpreter and a warm compile) would end the warm-up, and delay its job, later
still (measured for gpu-smoke's vision models in docs/results/).

A warm-up with a task that autotunes (a max-autotune mode on the GPU pair: Inductor benchmarks candidate kernels
on the GPU) holds a GPU slot's lock throughout and points its tasks at that GPU (gpu_slots.gpu_held), so that its
benchmarks never run beside a timing job's measurement; the manifest records the GPU and the wait.

Each task runs in a fresh `python -m abstraction_cost.study_b.compile_cache` process (CUDA cannot be
initialised in forked children, and a spawned pool would re-run the rule's script). A failed or crashed task is
reported in the manifest and the log and fails nothing: the job that compiles the same graph records the
failure as a row.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import torch

from ..compile import inductor_env
from ..implementations import AUTOTUNE_MODES
from ..measure import device as devices
from ..measure import gpu_slots
from ..measure import numerics as nx
from . import configurations as cfgs
from .blocks import experiments, registry
from .models import vision as vm

log = logging.getLogger(__name__)

STOPPED = "stopped"   # a task stopped because the probe found the warm-up's entries unusable
STOP_POLL_S = 0.5
MIN_PROBED_TASKS = 3   # a warm-up with fewer tasks is not probed (see above)

# Longest compiles first (longest-processing-time scheduling); ranks from cold-cache compile times on a GPU.
_COST_RANK = {"densenet121": 0, "googlenet": 1, "resnet50": 2, "resnet50_in_model": 2, "mobilenet_v2": 3,
              "squeezenet1_1": 4, "resnet50_convs": 4, "alexnet": 5, "conv_blocks": 5, "conv_ablation": 6,
              "matmul": 6}


def tasks(config: dict) -> tuple[list[dict], list[dict]]:
    """(tasks to compile, longest first; skipped tasks with the reason) for every Study B timing job."""
    todo, skipped = [], []
    for task, reason in [*_vision_tasks(config), *_block_tasks(config)]:
        if reason is None:
            todo.append(task)
        else:
            skipped.append({**task, "reason": reason})
    todo.sort(key=lambda t: _COST_RANK[t["name"]])
    return todo, skipped


def _vision_tasks(config: dict) -> Iterator[tuple[dict, str | None]]:
    section = config["study_b"]["models"]
    wanted = [(mode, "whole") for mode in section["modes"]] + [(section["layer_mode"], "blocks")]
    for pair, models in section["models"].items():
        for model in models:
            for setting in vm.settings(config, pair):
                for mode, what in wanted:
                    task = {"study": "models", "name": model, "pair": pair, "mode": mode, "what": what,
                            "setting": [setting.batch_size, setting.numerics, setting.memory_format]}
                    case = vm.case_from_config(config, model, pair, mode, setting)
                    yield task, vm.not_run_reason(case, config)


def _block_tasks(config: dict) -> Iterator[tuple[dict, str | None]]:
    blocks = config["study_b"]["blocks"]
    for name, exp in registry.EXPERIMENTS.items():
        section = blocks[exp.config_key]
        for pair in section["pairs"]:
            for mode in section["modes"]:
                task = {"study": "blocks", "name": name, "pair": pair, "mode": mode, "what": "cases"}
                yield task, registry.job_not_run_reason(config, pair, mode, blocks["require_gpu"],
                                                        torch.cuda.is_available())


def of_job(found: list[dict], job: dict | None) -> list[dict]:
    """The tasks of one timing job, named by the items its tasks share ({"study": "blocks", "name": experiment,
    "pair": ..., "mode": ...} or {"study": "models", "name": model, "pair": ...}); all of them for None."""
    return found if job is None else [t for t in found if all(t.get(k) == v for k, v in job.items())]


def autotunes(task: dict) -> bool:
    """Whether compiling the task benchmarks candidate kernels on the GPU (Inductor's max-autotune)."""
    return task["pair"] == "gpu" and task["mode"] in AUTOTUNE_MODES


def worker_plan(n_tasks: int, threads: int) -> tuple[int, int, bool]:
    """How a warm-up of n_tasks spends `threads`: (worker processes, Triton compile threads each, whether its last
    task is the probe's), a worker per two threads; the probe's worker shares the threads."""
    probes = n_tasks >= MIN_PROBED_TASKS
    workers = max(1, min(n_tasks - probes, threads // 2))
    return workers, max(1, threads // (workers + probes)), probes


def warm(config: dict, cache_dir: str, threads: int, job: dict | None = None) -> dict:
    """Compile every task (of one timing job: of_job) into `cache_dir` with up to threads // 2 worker
    processes, unless the probe shows that the jobs cannot hit the entries; the manifest to write. A warm-up with
    a task that autotunes holds a GPU slot's lock throughout and compiles on that GPU (gpu_slots.gpu_held): its
    benchmarks of candidate kernels would otherwise run on a GPU where a timing job measures."""
    todo, skipped = (of_job(found, job) for found in tasks(config))
    if not any(autotunes(t) for t in todo):
        nice = inductor_env.yield_cores(config)   # not while holding a GPU: that would hold it longer
        return {**_warm(config, cache_dir, threads, todo, skipped, {}), "nice": nice}
    owner = f"compile warm-up {json.dumps(job, sort_keys=True)} (pid {os.getpid()})"
    with gpu_slots.gpu_held(config, owner, log) as slot:
        visible = {} if slot is None or slot.gpu.uuid.startswith("GPU-fake-") else {
            "CUDA_VISIBLE_DEVICES": slot.gpu.uuid}
        manifest = _warm(config, cache_dir, threads, todo, skipped, visible)
    return {**manifest, "nice": 0, "gpu": None if slot is None else slot.gpu.index,
            "gpu_wait_s": None if slot is None else slot.wait_s}


def _warm(config: dict, cache_dir: str, threads: int, todo: list[dict], skipped: list[dict], visible: dict) -> dict:
    # usable: whether a job-like process hits the warm-up's entries; None where not probed (fewer than three tasks:
    # the probe saves the rest of a warm-up only where the rest is more than the one task compiling beside it)
    workers, compile_threads, probes = worker_plan(len(todo), threads)
    probed = todo[-1] if probes else None
    rest = todo[:-1] if probed else todo
    start = time.perf_counter()
    path = os.path.abspath(cache_dir)
    os.makedirs(path, exist_ok=True)
    # each worker starts with the cache's location, its share of the cores for Triton's parallel compilation,
    # and the jobs' own torch thread count (Inductor's cache key includes it)
    env = {**os.environ, **inductor_env.job_thread_env(), **inductor_env.cache_env(path, compile_threads), **visible}
    job_env = {**os.environ, **inductor_env.job_thread_env(), **inductor_env.cache_env(path, 1), **visible}
    probe, usable, reason = [], None, None
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        compiling = [pool.submit(_in_worker, config, task, env, stop) for task in rest]
        if probed:
            probe = [_in_worker(config, probed, env), _in_worker(config, probed, job_env)]
            warmed, again = probe
            missed = not again["cache_hits"] and again["cache_misses"]
            usable = not (warmed["status"] == "ok" and again["status"] == "ok" and missed)
            if not usable:
                reason = (f"a job-like process compiling {again['name']} again after the warm-up missed the cache "
                          f"({again['cache_misses']} misses, 0 hits): the jobs would miss every entry, so the rest of "
                          "the warm-up is stopped and they compile cold")
                log.warning("%s", reason)
                stop.set()
        results = [f.result() for f in compiling]
    done = probe[:1] + [r for r in results if r["status"] != STOPPED]
    skipped += [{**t, "reason": "the warm-up cannot be hit (see usable)"} for t, r in zip(rest, results)
                if r["status"] == STOPPED]
    return {"cache_dir": path, "torch": torch.__version__, "workers": workers, "compile_threads": compile_threads,
            "seconds": time.perf_counter() - start, "usable": usable, "reason": reason, "probe": probe,
            "tasks": done, "skipped": skipped}


def _in_worker(config: dict, task: dict, env: dict, stop: threading.Event | None = None) -> dict:
    """One task in a fresh process; stopped (status STOPPED) where `stop` is set before it ends."""
    start = time.perf_counter()
    stopped = lambda: stop is not None and stop.is_set()  # noqa: E731
    if stopped():
        return {**task, "status": STOPPED, "message": None, "seconds": 0.0}
    proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    sent = json.dumps({"config": config, "task": task})
    while True:
        try:
            out, err = proc.communicate(sent, timeout=STOP_POLL_S)
            break
        except subprocess.TimeoutExpired:   # nothing is lost: the next call goes on reading (and sends no input)
            sent = None
            if stopped():
                proc.kill()
    if stopped():
        return {**task, "status": STOPPED, "message": None, "seconds": time.perf_counter() - start}
    lines = out.strip().splitlines()
    if proc.returncode == 0 and lines:
        result = json.loads(lines[-1])
    else:
        tail = " | ".join(err.strip().splitlines()[-3:])
        result = {**task, "status": "error", "message": f"worker exited with {proc.returncode}: {tail}"[:500],
                  "seconds": time.perf_counter() - start}
    log.info("%(study)s %(name)s %(pair)s %(mode)s %(what)s: %(status)s in %(seconds).1f s %(message)s",
             {**result, "message": result["message"] or ""})
    return result


def _compile(config: dict, task: dict) -> dict:
    """One task: the same construction as its job (its setting's numerics included), timed from the model's or
    cases' construction; with the Inductor cache's hits and misses."""
    start, before = time.perf_counter(), cfgs.compile_counters()
    status, message = "ok", None
    try:
        devices.apply_numerics(config)
        if task["study"] == "blocks":
            experiments.compile_cases(task["name"], config, task["pair"], task["mode"])
        else:
            setting = vm.Setting(*task["setting"])
            case = vm.case_from_config(config, task["name"], task["pair"], task["mode"], setting)
            loaded = vm.load_case(case)
            with torch.no_grad(), nx.applied(setting.numerics), nx.autocast(setting.numerics, loaded.device):
                if task["what"] == "whole":
                    vm.prepare_whole(loaded.model, case, loaded.inputs[0], loaded.device)
                else:
                    vm.compile_units(loaded, case)
    except Exception as err:   # recorded; the job meets the same failure and writes it as a row
        status, message = vm.status_of(err), f"{type(err).__name__}: {str(err).strip()[:300]}"
    counted = cfgs.compile_counters() - before
    return {**task, "status": status, "message": message, "seconds": time.perf_counter() - start,
            "cache_hits": counted.cache_hits, "cache_misses": counted.cache_misses}


if __name__ == "__main__":   # a worker: one task from stdin, its result as the last line of stdout
    payload = json.load(sys.stdin)
    print(json.dumps(_compile(payload["config"], payload["task"])))
