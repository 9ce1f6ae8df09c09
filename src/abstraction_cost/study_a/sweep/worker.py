"""A Python implementation of Study A's sweep as a served worker: the conductor (sweep_conductor.py) runs one such
process per Python implementation, and tells it, one command per line on stdin, which cell to prepare and when to
time a block of calls. It answers one JSON record per command, the C++ programs' records of
native/common/sweep_serve.h, which states the protocol.

    python -m abstraction_cost.study_a.sweep.worker SPEC.json

The worker imports torch once and keeps one model for the whole walk, so an implementation's start-up is paid once
per invocation, and a baseline (eager) never runs in a process that has loaded compiled code. Python's garbage
collector is off while a cell is timed (its objects are frozen after the model loads): a collection would land on
whichever call crossed its threshold.

With `logits_dir` in its spec (the backend comparison's parity check), the worker also saves each measured cell's
logits there at `end`, as the C++ programs do with --logits-dir: one untimed call after the cell's timed ones.
"""
from __future__ import annotations

import gc
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from ...faults import InjectedCrash
from ...measure import device as devices
from ...measure import profiled
from ...measure.output_check import WrongOutput
from ...measure.timing import StepTimer, synchronize
from ...programs.workers import worker_records
from ..transfer import Pool, cell_input
from .cells import Cell, OomTracker, _first_line, faults
from .python_model import PythonModel, Warmth, _oom_line, _release, oom_count

log = logging.getLogger(__name__)

STEADY_WINDOW = 3         # sweep_serve.h kSteadyWindow: warm-up calls per window
STEADY_TOLERANCE = 0.05   # kSteadyTolerance: two consecutive windows' medians within this are steady
WARMUP_BUDGET_S = 2.0     # kWarmupBudgetS: no window starts after this much warm-up


class ServedCells:
    """One implementation's cells on command: load(index) -> `cell_loaded` (built, checked, its input made; nothing
    timed, so every worker loads at once), prepare(index) -> `ready` (loaded unless it is, then warmed up) or the
    cell's final record, time(n) -> `block`, end() -> the cell's record, release()."""

    def __init__(self, model, cells: list[Cell], pool: Pool, device: torch.device, warmup: int, warmup_max: int,
                 oom_at: str = "", logits_dir: str | None = None):
        self.model, self.cells, self.pool, self.device = model, cells, pool, device
        self.warmup, self.warmup_max = warmup, warmup_max
        self.logits_dir = logits_dir
        self.tracker, self.injected, self.warmth = OomTracker(), faults(), Warmth()
        for item in filter(None, oom_at.split(",")):  # --oom-at of a restarted worker: R:B:T
            r, b, t = item.split(":", 2)
            self.tracker.add(Cell(-1, int(b), int(r), t))
        self.cell, self.data, self.times, self.h2d = None, None, [], []
        self.loaded, self.cold = None, False  # the cell index loaded and not yet warmed up; whether it was cold
        self.started = self.prepare_s = 0.0
        self.warmup_calls, self.ooms = 0, 0

    # ------------------------------------------------------------------------------------------ commands
    def load(self, index: int) -> dict:
        failed = self._load(index)
        cache = self.model.cache or (None, None)
        return failed or {"kind": "cell_loaded", "cell": index, "prepare_s": self.prepare_s,
                          "build_s": self.model.build_s, "cache_hits": cache[0], "cache_misses": cache[1]}

    def prepare(self, index: int) -> dict:
        if self.loaded != index:
            failed = self._load(index)
            if failed is not None:
                return failed
        self.loaded = None
        return self._guarded(self._warm)

    def time(self, calls: int) -> dict:
        def block():
            times, h2d = self._timed(calls)
            self.times += times
            self.h2d += h2d
            return {"kind": "block", "cell": self.cell.index, "times_ms": times, "h2d_ms": h2d}
        return self._guarded(block)

    def profile(self, calls: int) -> dict:
        """The profiled pass (measure/profiled.py) of `calls` calls, after the cell's timed turns: never timed, with
        its kernel groups (the kernel table's at the kernel point). A failure is this record's status; the cell's
        timed calls stand."""
        def call():
            self.data.copy()
            self.model.forward(self.data.model_input())
        record = {"kind": "profile", "cell": self.cell.index}
        try:
            with torch.no_grad():
                return {**record, "status": "ok", **profiled.profiled_pass(call, self.device, calls, groups=True)}
        except Exception as err:  # noqa: BLE001 - an oom or error while profiling leaves the timed cell intact
            log.exception("profiling cell %s failed", self.cell)
            return {**record, "status": "oom" if isinstance(err, torch.OutOfMemoryError) else "error",
                    "message": _first_line(err)}

    def end(self) -> dict:
        if self.logits_dir is not None:
            self._save_logits()
        record = {**self._record("ok", None), "times_ms": self.times, "h2d_ms": self.h2d,
                  "h2d_bytes": self.data.nbytes, "prepare_s": self.prepare_s, "warmup_calls": self.warmup_calls,
                  "alloc_peak_mib": devices.alloc_peak_mib(self.device), "build_s": self.model.build_s,
                  "steady": self.steady}
        self.warmth.ran(self.cell)
        self.cell, self.data = None, None
        gc.enable()
        return record

    def release(self) -> dict:
        self.data = None
        _release(self.device, collect=True)
        self.warmth.released()
        return {"kind": "released"}

    # ------------------------------------------------------------------------------------------ inside
    def _save_logits(self) -> None:
        """The cell's logits on its input, from one untimed call after its timed ones: logits_dir/cell<K>.f32,
        float32, batch x classes (sweep_check.logits_file), renamed into place whole."""
        with torch.no_grad():
            logits = self.model.forward(self.data.to_device()).float().cpu().numpy()
        path = Path(self.logits_dir) / f"cell{self.cell.index}.f32"
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        np.ascontiguousarray(logits, dtype="<f4").tofile(tmp)
        os.replace(tmp, path)

    def _load(self, index: int) -> dict | None:
        """Cell `index` loaded; None, or its final record where it is skipped or fails."""
        cell = self.cells[index]
        self.cell, self.times, self.h2d, self.started, self.loaded = cell, [], [], time.monotonic(), None
        skip = self.tracker.skip_message(cell)
        if skip is not None:
            return self._final("oom", skip)
        if self.warmth.leaves_shape(cell):
            _release(self.device, collect=False)
        failed = self._guarded(self._build_and_check)
        if failed is None:
            self.loaded = index
        return failed

    def _build_and_check(self) -> None:
        cell, model = self.cell, self.model
        fault = self.injected.get(cell.index)
        if fault == "oom":
            raise torch.OutOfMemoryError("injected out of memory (AC_FAULT)")
        if fault == "crash":
            raise InjectedCrash("injected crash (AC_FAULT)")
        if fault == "wrong":
            raise WrongOutput("injected wrong output (AC_FAULT)")
        devices.reset_alloc_peak(self.device)
        self.ooms = oom_count(self.device)
        started = time.perf_counter()
        with torch.no_grad():
            self.data = data = cell_input(self.pool, cell.batch, cell.resolution, cell.transfer, self.device)
            if model.needs_reference(data.device_buffer.shape):
                data.load(self.pool)
                model.take_reference(data.to_device)
            model.build_s = None
            model.build(data.model_input())
            self.cold = self.warmth.calls(cell, 1) > 0
            if self.cold:
                model.forward(data.model_input())  # an oom shape fails here, before its host input is made
            if data.host is None:
                data.load(self.pool)
            synchronize(self.device)
            model.check(data.to_device)
        self.prepare_s = time.perf_counter() - started - (model.build_s or 0)

    def _warm(self) -> dict:
        gc.collect()
        gc.disable()  # until end(): no collection inside the warm-up's or the blocks' calls
        calls, self.steady, call_ms = self._warm_up(self.warmup if self.cold else 0)
        self.warmup_calls = calls + int(self.cold)
        return {"kind": "ready", "cell": self.cell.index, "warmup_calls": self.warmup_calls, "steady": self.steady,
                "call_ms": call_ms, "prepare_s": self.prepare_s, "build_s": self.model.build_s}

    def _warm_up(self, minimum: int) -> tuple[int, bool, float]:
        """Windows of timed calls until two consecutive medians agree within STEADY_TOLERANCE, after `minimum`
        calls, at most warmup_max calls or WARMUP_BUDGET_S: (calls, steady, the last window's median ms)."""
        calls, previous, started = 0, None, time.perf_counter()
        while True:
            m = statistics.median(self._timed(STEADY_WINDOW)[0])
            calls += STEADY_WINDOW
            if calls >= minimum and previous and abs(m / previous - 1) <= STEADY_TOLERANCE:
                return calls, True, m
            if calls >= max(minimum, self.warmup_max) or time.perf_counter() - started >= WARMUP_BUDGET_S:
                return calls, False, m
            previous = m

    def _timed(self, calls: int) -> tuple[list[float], list[float]]:
        """As the serial walk's timed calls: each synchronised before it starts, CUDA events from before the copy
        to the logits, and one after the copy."""
        times, copies = StepTimer(self.device), StepTimer(self.device)
        with torch.no_grad():
            for _ in range(calls):
                synchronize(self.device)
                with times.step():
                    with copies.step():
                        self.data.copy()
                    self.model.forward(self.data.model_input())
        return times.elapsed_ms(), copies.elapsed_ms()

    def _guarded(self, body) -> dict:
        try:
            return body()
        except WrongOutput as err:
            return self._failed("wrong_output", str(err))
        except Exception as err:
            # inside TorchScript's interpreter an oom is a RuntimeError: the allocator's count tells
            if isinstance(err, torch.OutOfMemoryError) or oom_count(self.device) > self.ooms:
                self.tracker.add(self.cell)
                return self._failed("oom", _oom_line(err))
            log.exception("cell %s failed", self.cell)
            return self._failed("error", _first_line(err))

    def _failed(self, status: str, message: str) -> dict:
        record = self._final(status, message)
        record["build_s"] = self.model.build_s  # a build that failed took its time all the same
        self.release()
        return record

    def _final(self, status: str, message: str | None) -> dict:
        record = {**self._record(status, message), "end_monotonic_s": time.monotonic()}
        self.cell, self.data = None, None
        gc.enable()
        return record

    def _record(self, status: str, message: str | None) -> dict:
        c = self.cell
        return {"kind": "cell", "cell": c.index, "batch": c.batch, "resolution": c.resolution,
                "transfer": c.transfer, "status": status, "message": message, "start_monotonic_s": self.started,
                "end_monotonic_s": time.monotonic()}


def serve(cells: ServedCells, commands, answer, up: dict | None = None) -> None:
    """The command loop: one record per command line, `sweep_start` first (with `up`, where the worker's start
    went, and when it was up) and `sweep_done` at the end of input."""
    ready = {"up": {**up, "ready_monotonic_s": time.monotonic()}} if up else {}
    answer({"kind": "sweep_start", "cells": len(cells.cells), "start_cell": 0, **ready})
    done = 0
    for line in commands:
        op, _, arg = line.strip().partition(" ")
        if op == "load":
            record = cells.load(int(arg))
        elif op == "cell":
            record = cells.prepare(int(arg))
        elif op == "time":
            record = cells.time(int(arg))
        elif op == "profile":
            record = cells.profile(int(arg))
        elif op == "end":
            record = cells.end()
        elif op == "release":
            record = cells.release()
        else:
            raise ValueError(f"serve: {line.strip()!r} is not 'load K', 'cell K', 'time N', 'profile N', 'end' or "
                             "'release'")
        done += record["kind"] == "cell"
        answer(record)
    cells.release()
    answer({"kind": "sweep_done", "cells": done})


def main(spec_path: str) -> None:
    """The worker process: SPEC.json names the implementation, its inputs, the grid and the numerics."""
    entered = time.monotonic()   # the conductor's clock too (CLOCK_MONOTONIC): its launch to here is the imports
    spec = json.loads(Path(spec_path).read_text())
    records = worker_records(f"{spec['implementation']} worker")
    devices.apply_numerics(spec["config"])
    device = torch.device(spec["device"])
    pool = Pool(spec["inputs"]["inputs"])
    pooled = time.monotonic()
    if device.type == "cuda":   # the driver and the device's context, which the model's build would start: timed apart
        torch.cuda.synchronize(device)
    context = time.monotonic()
    model = PythonModel(spec["implementation"], SimpleNamespace(**spec["inputs"]), pool.manifest["channels"],
                        spec["classes"], device, spec["numerics"], spec["compile_shapes"])
    up = {"entered_monotonic_s": entered, "inputs_s": pooled - entered, "cuda_s": context - pooled,
          "model_s": time.monotonic() - context}
    gc.collect()
    gc.freeze()  # the model's objects are never collected: later collections need not walk them
    cells = [Cell(*c) for c in spec["cells"]]
    served = ServedCells(model, cells, pool, device, spec["warmup"], spec["warmup_max"], spec.get("oom_at", ""),
                         spec.get("logits_dir"))
    serve(served, sys.stdin, lambda record: records.write(json.dumps(record) + "\n"), up)


if __name__ == "__main__":
    main(sys.argv[1])
