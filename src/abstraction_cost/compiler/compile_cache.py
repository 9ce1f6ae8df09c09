"""Rule vision_compile_cache: compile every vision model, in parallel processes, into the pipeline's Inductor
cache before the vision jobs time anything.

Compilation is mostly single-threaded Python (dynamo, AOT autograd, Inductor's lowering) and dominates the
vision jobs' wall time, while their timing must run one job at a time. So this one job, which holds the timing
slot (nothing is timed beside its CPU load) and every core, compiles what the jobs will compile, one task per
(model, pair, mode, what) spread over worker processes: `whole` is the model compiled whole
(vision_models.prepare_whole) and `blocks` every block alone (vision_models.compile_units, layer mode only).
Each worker repeats the jobs' own construction (same model, inputs, numerics and torch.compile arguments), so
their graphs hit this cache and a job's compile is a warm one. Segments of selective compilation depend on the
oracles' choice and are compiled by their job.

Each task runs in a fresh `python -m abstraction_cost.compiler.compile_cache` process (CUDA cannot be
initialised in forked children, and a spawned pool would re-run the rule's script). A failed or crashed task is
reported in the manifest and the log and fails nothing: the vision job that compiles the same graph records the
failure as a row.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from ..measure import device as devices
from . import vision_models as vm

log = logging.getLogger(__name__)

# Biggest first, so that the longest compiles start first (longest-processing-time scheduling).
_ORDER = ("densenet121", "googlenet", "resnet50", "mobilenet_v2", "squeezenet1_1", "alexnet")


def tasks(config: dict) -> tuple[list[dict], list[dict]]:
    """(tasks to compile, skipped tasks with the reason) for every (model, pair) of study_b.models."""
    section = config["study_b"]["models"]
    todo, skipped = [], []
    wanted = [(mode, "whole") for mode in section["modes"]] + [(section["layer_mode"], "blocks")]
    for pair, models in section["models"].items():
        for model in sorted(models, key=_ORDER.index):
            for mode, what in wanted:
                task = {"model": model, "pair": pair, "mode": mode, "what": what}
                reason = vm.not_run_reason(vm.case_from_config(config, model, pair, mode), config)
                if reason is None:
                    todo.append(task)
                else:
                    skipped.append({**task, "reason": reason})
    return todo, skipped


def warm(config: dict, cache_dir: str, threads: int) -> dict:
    """Compile every task into `cache_dir` with up to threads // 2 worker processes; the manifest to write."""
    todo, skipped = tasks(config)
    workers = max(1, min(len(todo), threads // 2))
    compile_threads = max(1, threads // workers)
    start = time.perf_counter()
    with vm.compile_cache(config, cache_dir) as path:
        # workers inherit the cache location, and their share of the cores for Triton's parallel compilation
        env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": str(compile_threads)}
        with ThreadPoolExecutor(max_workers=workers) as pool:
            done = list(pool.map(lambda task: _in_worker(config, task, env), todo))
    return {"cache_dir": path, "torch": torch.__version__, "workers": workers, "compile_threads": compile_threads,
            "seconds": time.perf_counter() - start, "tasks": done, "skipped": skipped}


def _in_worker(config: dict, task: dict, env: dict) -> dict:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", __name__], input=json.dumps({"config": config, "task": task}),
                          capture_output=True, text=True, env=env)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and lines:
        result = json.loads(lines[-1])
    else:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        result = {**task, "status": "error", "message": f"worker exited with {proc.returncode}: {tail}"[:500],
                  "seconds": time.perf_counter() - start}
    log.info("%(model)s %(pair)s %(mode)s %(what)s: %(status)s in %(seconds).1f s %(message)s",
             {**result, "message": result["message"] or ""})
    return result


def _compile(config: dict, task: dict) -> dict:
    """One task: the same construction as the vision job, timed from the model's load."""
    start = time.perf_counter()
    status, message = "ok", None
    try:
        devices.apply_numerics(config)
        case = vm.case_from_config(config, task["model"], task["pair"], task["mode"])
        loaded = vm.load_case(case)
        with torch.no_grad():
            if task["what"] == "whole":
                vm.prepare_whole(loaded.model, case, loaded.inputs[0], loaded.device)
            else:
                vm.compile_units(loaded, case)
    except Exception as err:   # recorded; the vision job meets the same failure and writes it as a row
        status, message = vm.status_of(err), f"{type(err).__name__}: {str(err).strip()[:300]}"
    return {**task, "status": status, "message": message, "seconds": time.perf_counter() - start}


if __name__ == "__main__":   # a worker: one task from stdin, its result as the last line of stdout
    payload = json.load(sys.stdin)
    print(json.dumps(_compile(payload["config"], payload["task"])))
