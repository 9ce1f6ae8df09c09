"""The study's timing variants (its Table 4.1 and Fig. 5.7): what timers, synchronisation and the profiler do.

Variants, each for the eager and the compiled configuration of a pair, unprofiled and inside torch.profiler:

| timing | timers around every block | synchronisation | e2e is | arr_sum is |
| --- | --- | --- | --- | --- |
| pure | no | only after the last of `calls` calls | (window of the calls) / calls | – |
| sync | no | after every call | each call, synchronised | – |
| timed | yes, host timers (perf_counter) | only after the last call | (window) / calls | Σ block timers of each call |
| timed_sync | yes | before and after every block | each call, synchronised | Σ block timers of each call |

`pure` is the model as the user runs it: nothing added; its e2e closes with one synchronisation so that the
queued GPU work is counted. Without synchronisation a host timer around a block measures the time to launch
its kernels, not to run them: `timed` arr_sum on the GPU shows exactly that. The timers are Python's
perf_counter_ns, as in the study. The compiled configuration of pure and sync is the whole model compiled
(one graph); the timed variants need a timer between blocks, which in a compiled model is a graph break, so
they run the blocks compiled one by one (vision_models.compile_unit) with the timers between them.
`profiled` wraps the calls of one measurement in torch.profiler.profile (CPU activity, and CUDA on the GPU);
the profiler starts before and stops after the timed window, so its trace processing is not timed. On the GPU a
profiled e2e row also carries `device_ms`, the kernels' device time per call (kernel_ms): device_ms / time_ms is
the fraction of the call the GPU was busy, near 1 where kernels bound the time and far below it where launching
them from the host does (the profiler's own per-op overhead lowers it a little).
"""
from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Callable

import torch

from ...measure.timing import gc_paused, synchronize
from . import vision as vm

TIMINGS = ("pure", "sync", "timed", "timed_sync")
METRICS = ("e2e", "arr_sum")


def measure(timing: str, whole: Callable, parts: list[Callable], xs: list[torch.Tensor],
            device: torch.device) -> tuple[list[float], list[float]]:
    """One measurement of `len(xs)` calls: (e2e samples in ms, arr_sum samples in ms)."""
    ms = lambda ns: ns / 1e6  # noqa: E731
    e2e, arr = [], []
    if timing in ("pure", "timed"):
        synchronize(device)
        start = time.perf_counter_ns()
        for x in xs:
            if timing == "pure":
                whole(x)
            else:
                total = 0
                for f in parts:
                    t0 = time.perf_counter_ns()
                    x = f(x)
                    total += time.perf_counter_ns() - t0
                arr.append(ms(total))
        synchronize(device)
        e2e.append(ms(time.perf_counter_ns() - start) / len(xs))
    elif timing in ("sync", "timed_sync"):
        for x in xs:
            synchronize(device)
            start = time.perf_counter_ns()
            if timing == "sync":
                whole(x)
                synchronize(device)
            else:
                total = 0
                for f in parts:
                    synchronize(device)
                    t0 = time.perf_counter_ns()
                    x = f(x)
                    synchronize(device)
                    total += time.perf_counter_ns() - t0
                arr.append(ms(total))
            e2e.append(ms(time.perf_counter_ns() - start))
    else:
        raise ValueError(f"unknown timing {timing!r}; allowed: {list(TIMINGS)} (config key "
                         "study_b.models.timing_methods.timings)")
    return e2e, arr


def profiler(device: torch.device):
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(activities=activities, record_shapes=False, with_stack=False)


def kernel_ms(prof) -> float:
    """The device time of every kernel (and copy) the profiler recorded, in ms: the time the GPU was busy."""
    device = torch.autograd.DeviceType.CUDA
    return sum(e.time_range.elapsed_us() for e in prof.events() if e.device_type == device) / 1e3


def _row(case, configuration, timing, profiled, metric, r, k, t, status="ok", message=None, device_ms=None):
    return {**case.columns(configuration), "timing": timing, "profiled": profiled, "metric": metric,
            "round": r, "repeat": k, "time_ms": t, "device_ms": device_ms, "status": status, "message": message}


def timing_methods(case: vm.Case, config: dict, run, loaded: vm.Loaded | None) -> list[dict]:
    """vision_timing_methods rows for one (model, pair), with the job's shared compiled model and units."""
    section = config["study_b"]["models"]["timing_methods"]
    timings, profiled_values, calls = section["timings"], section["profiled"], section["calls"]
    combos = [(cfg, t, p) for cfg in (case.eager, case.compiled) for t in timings for p in profiled_values]

    def failed(status, message):
        return [_row(case, cfg, t, p, m, None, None, None, status, message)
                for cfg, t, p in combos for m in (("e2e", "arr_sum") if t.startswith("timed") else ("e2e",))]

    reason = vm.not_run_reason(case, config)
    if reason is not None:
        return failed("not_run", reason)
    device = loaded.device
    rows: list[dict] = []
    with torch.no_grad():
        inputs = [x for (x,) in loaded.inputs]
        try:
            vm.ensure_compiled(case, loaded, run)
        except Exception as err:
            return failed(vm.status_of(err), vm.message_of(err))
        callables = {case.eager.name: (loaded.model, [b.module for b in loaded.parts]),
                     case.compiled.name: (loaded.whole.fn, loaded.units)}
        try:
            with run.phase("timing-warmup"):
                for cfg, t, p in combos:
                    for _ in range(max(case.warmup, 1)):
                        with profiler(device) if p else nullcontext():
                            measure(t, *callables[cfg.name], inputs[:1], device)
            used = 0
            with run.phase("timing-timed"), vm.refuse_compilation(f"timing variants of {case.model}"), gc_paused():
                for r in range(case.rounds):
                    for cfg, t, p in (combos if r % 2 == 0 else combos[::-1]):
                        xs = [inputs[(used + j) % len(inputs)] for j in range(calls)]
                        used += calls
                        with profiler(device) if p else nullcontext() as prof:
                            e2e, arr = measure(t, *callables[cfg.name], xs, device)
                        busy = kernel_ms(prof) / len(xs) if p and device.type == "cuda" else None
                        rows.extend(_row(case, cfg, t, p, "e2e", r, k, v, device_ms=busy) for k, v in enumerate(e2e))
                        rows.extend(_row(case, cfg, t, p, "arr_sum", r, k, v) for k, v in enumerate(arr))
        except Exception as err:  # a failed or recompiling loop: every variant says why
            return failed(vm.status_of(err), vm.message_of(err))
    return rows
