"""Per-layer times of a vision model, by layer timers and by layer subtraction, eager and compiled (Fig. 5.8-5.11).

The job of a (model, pair) has the model's blocks (models/blocks.py) twice: as themselves (eager) and each
compiled as its own graph (vision_models.compile_unit, built once per job by ensure_compiled). Compiled blocks
are separate graphs because that is what a timer between two blocks forces on a compiled model (a timer is a
graph break), and because selective compilation (selective.py) is built from the same units. Interleaved in
rounds, with rotating inputs, it times:

- `timer`: every block bracketed by a host timer with synchronisation before and after (the study's layer timers
  with sync; their sum over blocks is the study's arr_sum), eager and compiled;
- `prefix`: blocks 0..k-1 run end to end for k = 0 .. n, eager and compiled (k = 0: the empty call, the timer's
  own cost), timed by measure.timing.benchmark, so block i's time by layer subtraction is P[i+1] - P[i]
  (the study's "time until layer N minus time until layer N-1", with medians);
- `mixed_to_compiled` / `mixed_to_eager`: blocks 0..i-1 in one state and block i in the other, for i = 1 .. n-1:
  the measured cost of switching at each boundary, which the dynamic programme charges (oracles.py).

A compiled block that receives eager output in one probe and compiled output in another sees different strides
and is compiled for each (two cache entries); warm-up calls every probe first, so that no compilation happens
inside the rounds, and a recompile there turns every row of the job into status error. From those rows to
per-block times and the switch-cost model: layer_fit.py.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch

from ...measure.timing import benchmark, gc_paused, synchronize
from . import vision as vm
from .vision import refuse_compilation

MEASURES = ("timer", "prefix", "mixed_to_compiled", "mixed_to_eager")


def chain(fns: list[Callable]) -> Callable:
    def run(x):
        for f in fns:
            x = f(x)
        return x
    return run


def timed_blocks(fns: list[Callable], x: torch.Tensor, device: torch.device) -> list[float]:
    """One call with a synchronised host timer around every block: ms per block."""
    out = []
    for f in fns:
        synchronize(device)
        start = time.perf_counter_ns()
        x = f(x)
        synchronize(device)
        out.append((time.perf_counter_ns() - start) / 1e6)
    return out


@dataclass(frozen=True)
class Probe:
    measure: str
    configuration: str
    block: int                 # timer: unused (every block); prefix: k; mixed: boundary i
    fn: Callable


def _row(case, configuration, measure, block, names, kinds, r, k, t, status="ok", message=None):
    named = 0 <= block < len(names)
    return {**case.columns(configuration), "measure": measure, "block": block,
            "block_name": names[block] if named else ("input" if block == 0 or measure == "prefix" else None),
            "block_kind": kinds[block] if named else None,
            "round": r, "repeat": k, "time_ms": t, "status": status, "message": message}


def layer_times(case: vm.Case, config: dict, run, loaded: vm.Loaded | None, log=None) -> list[dict]:
    """vision_layer_times rows for one (model, pair) in the case's mode, with the job's shared units."""
    reason = vm.not_run_reason(case, config)
    if reason is not None:
        return [{**case.columns(case.compiled), "measure": m, "block": None, "block_name": None,
                 "block_kind": None, "round": None, "repeat": None, "time_ms": None, "status": "not_run",
                 "message": reason} for m in MEASURES]
    device, parts, inputs = loaded.device, loaded.parts, loaded.inputs
    with torch.no_grad():
        names = [b.name for b in parts]
        kinds = [b.kind for b in parts]
        n = len(parts)
        eager = [b.module for b in parts]
        e, c = case.eager, case.compiled
        try:
            vm.ensure_compiled(case, loaded, run, log)
        except Exception as err:
            return [_row(case, c, m, 0, names, kinds, None, None, None, vm.status_of(err), vm.message_of(err))
                    for m in MEASURES]
        compiled = loaded.units
        probes = ([Probe("prefix", e.name, k, chain(eager[:k])) for k in range(n + 1)]
                  + [Probe("prefix", c.name, k, chain(compiled[:k])) for k in range(n + 1)]
                  + [Probe("mixed_to_compiled", c.name, i, chain(eager[:i] + [compiled[i]])) for i in range(1, n)]
                  + [Probe("mixed_to_eager", c.name, i, chain(compiled[:i] + [eager[i]])) for i in range(1, n)])
        timers = [(e.name, eager), (c.name, compiled)]
        rows: list[dict] = []
        try:
            with run.phase("layers-warmup"):
                # at least one call per probe even with warmup 0: a compiled block fed a new layout compiles here
                for p in probes:
                    benchmark(p.fn, inputs, device=device, warmup=max(case.warmup, len(inputs)), repeats=0)
                for _, fns in timers:
                    for _ in range(max(case.warmup, 1)):
                        timed_blocks(fns, inputs[0][0], device)
            calls = 0
            with run.phase("layers-timed"), refuse_compilation(f"layer probes of {case.model}"), gc_paused():
                for r in range(case.rounds):
                    order = probes if r % 2 == 0 else probes[::-1]
                    for cfg_name, fns in (timers if r % 2 == 0 else timers[::-1]):
                        timed_blocks(fns, inputs[(calls - 1) % len(inputs)][0], device)   # untimed, as in interleaved
                        for k in range(case.repeats_per_round):
                            x = inputs[(calls + k) % len(inputs)][0]
                            for i, t in enumerate(timed_blocks(fns, x, device)):
                                rows.append(_row(case, cfg_name, "timer", i, names, kinds, r, k, t))
                        calls += case.repeats_per_round
                    for p in order:
                        shift = calls % len(inputs)
                        rotated = list(inputs[shift:]) + list(inputs[:shift])
                        p.fn(*rotated[-1])                 # one untimed call, as in study_b/blocks/interleaved.py
                        ms = benchmark(p.fn, rotated, device=device, warmup=0, repeats=case.repeats_per_round,
                                       flush_l2=case.flush_l2)
                        calls += case.repeats_per_round
                        rows.extend(_row(case, p.configuration, p.measure, p.block, names, kinds, r, k, t)
                                    for k, t in enumerate(ms))
        except Exception as err:  # a failed or recompiling loop: every measure of the job says why
            return [_row(case, c, m, 0, names, kinds, None, None, None, vm.status_of(err), vm.message_of(err))
                    for m in MEASURES]
    return rows
