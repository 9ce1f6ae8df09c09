"""The sweep's compile warm-up (rule compile_cache_sweep, study_a.sweep.compile_warm_up): before an interleaved sweep
job starts, its torch.compile entries build the shapes it will build into the sweep's own Inductor cache, off the
GPU slot, so that the job's workers build from that cache.

Without it the job's first invocation compiles cold on the slot (a cold compile of ResNet-50 is tens of seconds,
most of a small sweep's loading: docs/results/) and walks the cells alone, since its builds fill the
cache the later invocations hit (InvocationProtocol.batch's first_alone). With it, every invocation's build is a
warm one, so the first invocations walk together; the job's `build_s` is then a warm build, as Study B's first
calls are, and the warm-up's cold builds are the table's `cold_build_s`.

The warm-up runs the job's own workers (the sweep worker with the job's spec, forked from a fork server as the
job's are, at the job's torch thread count: Inductor's cache key includes it), each told to load the cells one
after another, nothing timed; so its graphs are the job's graphs, shape for shape. It takes no timing slot: like
Study B's warm-ups (study_b/compile_cache.py) it runs beside the timing jobs on the cores they leave, its first
calls and output checks on a GPU where another job may time. So it loads only the cells that the job's first
`invocations` walk together, every set of workers holding them at once (Protocol.together): those are where a cold
compile would hold every invocation back. A larger cell's memory would press on the job timing beside the warm-up,
and the job walks such a cell one invocation at a time, the first invocation's build (a recompile there, if any)
filling the cache for the next. A warm-up
whose entries time candidate algorithms as they load (max-autotune, cuDNN's benchmark mode:
implementations.times_algorithms) holds a GPU slot's lock throughout (gpu_slots.gpu_held), so that nothing times
beside its benchmarks.

A worker that dies or fails a cell is recorded in the manifest and fails nothing: the job meets the same failure
and writes it as a row, and compiles cold what the warm-up did not build.
"""
from __future__ import annotations

import logging
import os
import tempfile
import threading
import time

from ... import implementations as registry
from ...compile import inductor_env
from ...data.specs import spec
from ...measure import device as devices
from ...measure import gpu_slots
from ...measure import numerics as nx
from ...programs.workers import Worker, WorkerDied
from . import shards as sweep_shards
from .cells import Cell, Protocol, SweepSettings
from .conductor import python_worker_command
from .interleaved import not_run, python_spec
from .serial import _named

log = logging.getLogger(__name__)


def warmed_cells(cells: list[Cell], protocol: Protocol) -> list[Cell]:
    """The cells whose builds the warm-up makes: the first cell of each shape (a shape's other transfer modes run
    its build) that the first `invocations` walk together, in the walk's order."""
    seen, out = set(), []
    for cell in cells:
        shape = (cell.batch, cell.resolution)
        if shape not in seen and protocol.together(cell, protocol.invocations):
            seen.add(shape)
            out.append(cell)
    return out


def entries(active: list[str]) -> list[str]:
    """The implementations the warm-up builds for: the compile entries (implementations.compiles)."""
    return [impl for impl in active if registry.compiles(impl)]


def run(snakemake) -> dict:
    """One sweep job's warm-up (wildcards numerics and shard, the job's inputs, params.cache_dir): its manifest.
    The workers compile into the cache at the job's torch thread count (a timing job runs one thread:
    gpu_slots.one_thread_where_none_claimed), with the warm-up's threads shared out for Triton's compiles."""
    numerics, shard = snakemake.wildcards.numerics, int(snakemake.wildcards.shard)
    config = nx.job_config(snakemake.config, numerics, "study_a.sweep.numerics")
    settings = SweepSettings.from_config(config)
    protocol = Protocol.from_config(config["study_a"]["sweep"])
    classes = spec(config["study_a"]["backends"]["dataset"], config).classes
    device = devices.select(config)
    impls = [impl for impl in entries(settings.jobs())
             if not_run(impl, settings, numerics, device, snakemake.input) is None]
    cells = warmed_cells(sweep_shards.of_config(config)[shard], protocol)
    threads = max(1, snakemake.threads // max(1, len(impls)))
    cache_dir = os.path.abspath(snakemake.params.cache_dir)
    os.environ.update({**inductor_env.job_thread_env(), **inductor_env.cache_env(cache_dir, threads)})
    named = {k: str(v) for k, v in _named(snakemake.input).items()}
    manifest = {"cache_dir": cache_dir, "numerics": numerics, "shard": shard,
                "cells": [c.index for c in cells], "compile_threads": threads, "nice": 0, "gpu": None,
                "gpu_wait_s": None}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sweep-warm-up-") as spec_dir:
        commands = {impl: python_worker_command(python_spec(impl, named, classes, device, numerics, settings,
                                                            protocol, config), spec_dir) for impl in impls}
        command_for = lambda impl: commands[impl]("")  # noqa: E731 - no oom known before the walk
        if not any(registry.times_algorithms(impl, config) for impl in impls):
            manifest["nice"] = inductor_env.yield_cores(config)   # not while holding a GPU: it would hold it longer
            manifest["builds"] = warm(impls, command_for, cells)
        else:
            owner = f"sweep compile warm-up {numerics} shard {shard} (pid {os.getpid()})"
            with gpu_slots.gpu_held(config, owner, log) as slot:
                if slot is not None and not slot.gpu.uuid.startswith("GPU-fake-"):
                    os.environ["CUDA_VISIBLE_DEVICES"] = slot.gpu.uuid
                manifest["builds"] = warm(impls, command_for, cells)
            manifest.update(gpu=None if slot is None else slot.gpu.index,
                            gpu_wait_s=None if slot is None else slot.wait_s)
    manifest["seconds"] = time.perf_counter() - started
    return manifest


def warm(impls: list[str], command_for, cells: list[Cell]) -> dict[str, list[dict]]:
    """Every worker of `impls` (command_for(impl) its command line) started at once, each loading `cells` one after
    another in a thread of its own; per implementation, one record per cell: status, build_s (the shape's first
    call: its cold compile), message."""
    builds: dict[str, list[dict]] = {impl: [] for impl in impls}

    def walk(impl: str, worker: Worker) -> None:
        try:
            worker.ask(None, "sweep_start")
            for cell in cells:
                record = worker.ask(f"load {cell.index}", "cell_loaded", "cell")
                builds[impl].append({"cell": cell.index, "status": record.get("status", "ok"),
                                     "build_s": record.get("build_s"), "message": record.get("message"),
                                     "cache_hits": record.get("cache_hits"),
                                     "cache_misses": record.get("cache_misses")})
        except WorkerDied as died:   # the rest of its cells are left to the job, which meets the same failure
            done = {b["cell"] for b in builds[impl]}
            builds[impl] += [{"cell": c.index, "status": died.status, "build_s": None, "message": died.message}
                             for c in cells if c.index not in done]
        finally:
            worker.close()

    workers = {impl: Worker(impl, command_for(impl)) for impl in impls}
    threads = [threading.Thread(target=walk, args=(impl, w), name=f"warm-{impl}") for impl, w in workers.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for impl, records in builds.items():
        log.info("%s: %s", impl, ", ".join(f"cell {b['cell']} {b['status']} {_seconds(b['build_s'])}" for b in records))
    return builds


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f} s"
