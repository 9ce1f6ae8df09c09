"""A compile warm-up that autotunes benchmarks candidate kernels on a GPU: it holds a GPU slot's lock while it
compiles, waiting while a timing job holds the GPU, so no timing job measures beside its benchmarks; a warm-up
that does not autotune takes no lock (fake GPUs: measure/gpu_slots.py), and yields the shared cores to the builds
timing jobs read where gpus.warm_up_nice says."""
import os
import threading
import time

import pytest

from abstraction_cost.measure import gpu_slots
from abstraction_cost.study_b import compile_cache

TUNED = {"study": "blocks", "name": "matmul", "pair": "gpu", "mode": "max-autotune", "what": "cases"}
PLAIN = {**TUNED, "mode": "default"}


@pytest.fixture
def one_fake_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_slots, "LOCK_DIR", tmp_path / "locks")
    monkeypatch.setenv(gpu_slots.FAKE_GPUS_ENV, "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return gpu_slots.visible_gpus()


def _warm(monkeypatch, tmp_path, task, gpus=None):
    """warm() with one task whose compile is replaced by a record of whether the GPU's lock was held meanwhile."""
    seen = []

    def compile_in_worker(config, t, env, stop=None):
        fd = gpu_slots._try_lock(gpu_slots.visible_gpus()[0], "probe")
        if fd is not None:
            os.close(fd)
        seen.append(fd is None)   # locked by someone: the warm-up itself
        return {**t, "status": "ok", "message": None, "seconds": 0.0}

    monkeypatch.setattr(compile_cache, "tasks", lambda config: ([task], []))
    monkeypatch.setattr(compile_cache, "_in_worker", compile_in_worker)
    manifest = compile_cache.warm({"device": "cuda", "gpus": {"slots": None, **(gpus or {})}}, str(tmp_path / "cache"),
                                  threads=2)
    return manifest, seen


def test_an_autotuning_warm_up_compiles_holding_the_gpu_and_waits_for_a_timing_job(one_fake_gpu, monkeypatch,
                                                                                tmp_path):
    timing = gpu_slots.acquire(one_fake_gpu, "timing job")   # a timing job measures on the only GPU
    threading.Timer(0.6, os.close, [timing.fd]).start()     # and ends 0.6 s later
    started = time.monotonic()
    manifest, seen = _warm(monkeypatch, tmp_path, TUNED)
    assert seen == [True]                                # compiled while holding the GPU's lock
    assert manifest["gpu"] == 0 and manifest["gpu_wait_s"] >= 0.5 and time.monotonic() - started >= 0.5
    after = gpu_slots._try_lock(one_fake_gpu[0], "after")
    assert after is not None   # and let it go
    os.close(after)


def test_a_warm_up_that_does_not_autotune_takes_no_gpu(one_fake_gpu, monkeypatch, tmp_path):
    manifest, seen = _warm(monkeypatch, tmp_path, PLAIN)
    assert seen == [False] and "gpu" not in manifest


@pytest.mark.parametrize("task, nice", [(PLAIN, [7]), (TUNED, [])])
def test_a_warm_up_lowers_its_priority_by_warm_up_nice_unless_it_holds_a_gpu(one_fake_gpu, monkeypatch, tmp_path,
                                                                             task, nice):
    """gpus.warm_up_nice 7: a warm-up that holds no GPU adds 7 to its niceness before its workers start (they
    inherit it); one that autotunes holds a GPU and would only hold it longer, so it keeps its priority."""
    added = []
    monkeypatch.setattr(os, "nice", lambda n: added.append(n) or n)   # not this test process's own priority
    manifest, _ = _warm(monkeypatch, tmp_path, task, {"warm_up_nice": 7})
    assert added == nice and manifest.get("nice", 0) == sum(nice)
    added.clear()
    _warm(monkeypatch, tmp_path, PLAIN)   # the default: none
    assert added == []


def test_warm_up_nice_is_refused_outside_the_kernels_range_naming_its_key(smoke_config):
    from abstraction_cost import config as cfg
    smoke_config["gpus"] = {"warm_up_nice": 20}
    with pytest.raises(cfg.ConfigError, match=r"'gpus.warm_up_nice': 20 is greater than the maximum of 19"):
        cfg.validate(smoke_config)
