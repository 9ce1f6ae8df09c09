"""Timing: CUDA events on the GPU, perf_counter on the CPU; warm-up, synchronisation, repeats.

Two shapes, after triton.testing.do_bench and timm's benchmark.py:
- StepTimer brackets steps of a longer loop (training) without synchronising between them; the elapsed times
  are read once, after one synchronisation at the end.
- benchmark() times a callable repeatedly after warm-up, synchronising around every repeat, optionally
  flushing the L2 cache or rotating through several inputs so that tiny kernels are not timed on warm caches.
"""
from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from typing import Callable, Sequence

import torch


@contextmanager
def gc_paused():
    """Python's cyclic garbage collector off inside (after one collection), restored after.

    A collection triggered inside a timed loop lands on whichever call allocated the object that crossed the
    threshold, and the heap a job has built by then (compiled graphs, earlier steps' rows) makes later steps'
    collections longer: launch-bound eager calls of later steps then look slower (benchmarks/eager_drift.py)."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class StepTimer:
    """Collects one elapsed time per step; on a GPU the steps are bracketed by CUDA events."""

    def __init__(self, device: torch.device):
        self.device = device
        self._cuda = device.type == "cuda"
        self._events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._cpu_ms: list[float] = []
        self._open = None

    def start(self) -> None:
        if self._open is not None:
            raise RuntimeError("StepTimer.start() called twice without stop()")
        if self._cuda:
            self._open = torch.cuda.Event(enable_timing=True)
            self._open.record()
        else:
            self._open = time.perf_counter_ns()

    def stop(self) -> None:
        if self._open is None:
            raise RuntimeError("StepTimer.stop() without start()")
        if self._cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self._events.append((self._open, end))
        else:
            self._cpu_ms.append((time.perf_counter_ns() - self._open) / 1e6)
        self._open = None

    @contextmanager
    def step(self):
        self.start()
        yield
        self.stop()

    def elapsed_ms(self) -> list[float]:
        """Per-step times in ms; synchronises once on a GPU."""
        if self._cuda:
            synchronize(self.device)
            return [s.elapsed_time(e) for s, e in self._events]
        return list(self._cpu_ms)


class L2Flusher:
    """Overwrites a buffer twice the size of the GPU's L2 cache, so the next kernel starts cold."""

    def __init__(self, device: torch.device):
        size = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
        self._buffer = torch.empty(2 * size, dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        self._buffer.zero_()


def benchmark(fn: Callable, inputs: Sequence[tuple] = ((),), *, device: torch.device, warmup: int,
              repeats: int, flush_l2: bool = False) -> list[float]:
    """Time fn(*inputs[i % len(inputs)]) `repeats` times after `warmup` calls; returns ms per call.

    Rotating through several inputs (distinct tensors) and flushing L2 keep caches from flattering small
    kernels; the flush runs outside the timed region.
    """
    flush = L2Flusher(device) if flush_l2 and device.type == "cuda" else None
    for i in range(warmup):
        fn(*inputs[i % len(inputs)])
    synchronize(device)
    times = []
    for i in range(repeats):
        args = inputs[i % len(inputs)]
        if flush is not None:
            flush()
        timer = StepTimer(device)
        synchronize(device)
        with timer.step():
            fn(*args)
        times.extend(timer.elapsed_ms())
    return times
