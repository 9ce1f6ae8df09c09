"""Where a Study B timing job's compiles are cached and how they run: environment set before torch is imported;
how low a compile warm-up runs (yield_cores).

    from abstraction_cost.compile import inductor_env
    inductor_env.configure(snakemake.config, snakemake.params.cache_dir)   # first, before anything imports torch

This module imports no torch, and configure() refuses to run once torch is imported: torch reads
TORCHINDUCTOR_COMPILE_THREADS when torch._inductor.config is first imported, so a job that set it later would
still start Inductor's pool of compile workers.

Whether a job's compile was served by the cache is recorded on every compiled row (cache_hits, cache_misses).
A hit needs the same key in the job as in the warm-up worker: compile/cache_key.py makes torch's pickling of
memory formats (part of the key) independent of the process's imports. The warm-up still probes first (a
job-like process compiling one task again) and skips itself where the probe misses (compile_cache.warm).
"""
from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile

# Threads of a Study B timing job: its rule declares none, so Snakemake runs it with one and sets these.
JOB_THREADS = 1


def job_thread_env() -> dict[str, str]:
    """The thread variables Snakemake sets for a timing job. torch takes its intra-op thread count from them,
    and Inductor keys cached graphs on that count (CPU kernels specialise on it), so a warm-up worker compiling
    with the warm-up's thread count would fill a cache no job hits."""
    return dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"), str(JOB_THREADS))


def cache_env(path: str, compile_threads: int | None) -> dict[str, str]:
    """Inductor's and Triton's cache in `path`; compile_threads None leaves Inductor's default."""
    env = {"TORCHINDUCTOR_CACHE_DIR": path, "TRITON_CACHE_DIR": os.path.join(path, "triton")}
    if compile_threads is not None:
        env["TORCHINDUCTOR_COMPILE_THREADS"] = str(compile_threads)
    return env


def configure(config: dict, shared_dir: str | None) -> str | None:
    """Point this process's Inductor and Triton caches at the job's cache; the cache directory, or None.

    With study_b.fresh_compile_cache an empty directory of its own (removed at exit), compiled into with
    Inductor's default (parallel) compile workers: first_call_ms is a cold compile, as a user's first run sees
    it. Else `shared_dir`, the cache rule compile_cache filled: first_call_ms is a warm compile, and the job
    compiles in its own process (one compile thread), since its graphs come from the cache and Inductor's pool
    of compile workers costs seconds to start and stop in every job. Without a
    shared_dir: the machine's default cache, unchanged.
    """
    if "torch" in sys.modules:
        raise RuntimeError("inductor_env.configure() must run before torch is imported (first in the rule's "
                           "script): torch reads these variables when it starts")
    if config["study_b"]["fresh_compile_cache"]:
        path = tempfile.mkdtemp(prefix="study-b-inductor-")
        atexit.register(shutil.rmtree, path, True)
        os.environ.update(cache_env(path, None))
        return path
    if shared_dir is None:
        return None
    path = os.path.abspath(shared_dir)
    os.makedirs(path, exist_ok=True)
    # one compile thread even where the warm-up was skipped (compile_cache.warm's probe): a pool of compile
    # workers left in a timing job's process is a suspect of eager drift (benchmarks/eager_drift.py)
    os.environ.update(cache_env(path, 1))
    return path


def yield_cores(config: dict) -> int:
    """Lower a compile warm-up's CPU priority (Study B's, the sweep's) by config gpus.warm_up_nice (0: not), its
    compile workers inheriting it: the builds that timing jobs read (the C++ programs; the AOTInductor packages,
    whose mostly serial builds are a two-GPU run's critical path) and the timing jobs' staged starts share the
    cores that time nothing with the warm-ups, and Snakemake's priorities order only when jobs start, not their
    share of a busy core. Returns the niceness added."""
    nice = (config.get("gpus") or {}).get("warm_up_nice", 0)
    if nice:
        os.nice(nice)
        logging.getLogger(__name__).info("compile warm-up at niceness +%d (gpus.warm_up_nice): the builds timing "
                                         "jobs read go first", nice)
    return nice
