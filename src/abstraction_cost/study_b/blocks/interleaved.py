"""Timing eager and compiled callables interleaved: alternate rounds, not one block after the other.

    times = interleaved([eager, compiled], inputs, device=dev, warmup=3, rounds=10, repeats_per_round=2,
                        min_seconds=1.0, pick=cpus.pick)
    times[i] -> [(round, repeat, time_ms), ...] for prepared[i]

Each round times every callable `repeats_per_round` times with measure.timing.benchmark (synchronised, CUDA
events on the GPU, optional L2 flush, rotating inputs); the order within a round alternates (A B, then B A), so
a slow drift of clocks or temperature loads both sides alike. Each callable's turn in a round starts with one
untimed call, and Python's garbage collector is paused during the rounds (measure.timing.gc_paused), so that
neither the previous callable's leftovers nor a collection is timed as this one's. Warm-up (at least one call per
input set) runs per callable before the first round and is checked for recompilations (Prepared.recompiles); any
frame compiled during the rounds raises configurations.Recompiled. `pick` runs before each round: the caller's turn
pick (measure/affinity.py), which moves the timing thread to the fastest of its slot's CPUs at the moment (a VM's
CPUs switch between two speeds, 2x apart, about every second).

Past `rounds`, rounds go on until they have lasted `min_seconds`. A batch-1 case's fixed rounds (ten calls of tens
of microseconds) take milliseconds: their medians differed up to 1.9x between runs on a quiet host, mostly from so
few samples and partly from the state each run met. Rounds for a second give hundreds of samples across its states.
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

import torch

from ...measure.timing import benchmark, gc_paused
from ..configurations import Prepared, no_recompile


def interleaved(prepared: Sequence[Prepared], inputs: Sequence[tuple], *, device: torch.device, warmup: int,
                rounds: int, repeats_per_round: int, flush_l2: bool = False, min_seconds: float = 0.0,
                pick: Callable[[], object] = lambda: None) -> list[list[tuple[int, int, float]]]:
    if rounds < 1 or repeats_per_round < 1:
        raise ValueError(f"rounds ({rounds}) and repeats_per_round ({repeats_per_round}) must be at least 1")
    if min_seconds < 0:
        raise ValueError(f"min_seconds ({min_seconds}) must be at least 0")
    for p in prepared:
        # every input set is seen in warm-up, so a guard that tells sets apart recompiles here (counted in
        # Prepared.recompiles) rather than inside the timed rounds
        benchmark(p.fn, inputs, device=device, warmup=max(warmup, len(inputs)), repeats=0)
        p.note_warmup()
    out: list[list[tuple[int, int, float]]] = [[] for _ in prepared]
    order = list(range(len(prepared)))
    calls = 0
    with no_recompile(*prepared), gc_paused():
        started = time.perf_counter()
        r = 0
        while r < rounds or time.perf_counter() - started < min_seconds:
            pick()
            for i in (order if r % 2 == 0 else order[::-1]):
                # continue the rotation across rounds, so consecutive calls never reuse the last input set
                shift = calls % len(inputs)
                rotated = list(inputs[shift:]) + list(inputs[:shift])
                # one untimed call first: the callable's first call after another's runs on caches (host code,
                # allocator blocks) the other left, and would be timed as its own
                prepared[i].fn(*rotated[-1])
                ms = benchmark(prepared[i].fn, rotated, device=device, warmup=0, repeats=repeats_per_round,
                               flush_l2=flush_l2)
                calls += repeats_per_round
                out[i].extend((r, k, t) for k, t in enumerate(ms))
            r += 1
    return out
