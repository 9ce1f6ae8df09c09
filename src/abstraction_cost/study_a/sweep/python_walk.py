"""The serial walk of a Python implementation: one process measures every cell in walk order (cells.py), one row
per cell, each kept as it completes (store.py).

Per cell, in Python as in C++ (native/common/sweep.h): the device input buffer is made and zeroed (untimed), on a
cold cell (a shape's first, the first uint8-pinned, or a new CUDA graph: Warmth, SweepBackend::prepare) `warmup`
calls are queued on it (so a shape out of memory fails before its host input is made), the host input is made
while the device runs them (untimed), then `repeats` timed calls, fewer once they took
study_a.sweep.cell_budget_s (cells.more_repeats), each synchronised before it starts; CUDA events from before the
host-to-device copy to the logits, and one after the copy: the copy's own time comes from the same calls. A
compiled build is timed only once its logits on the cell's input are eager's within the numerics' tolerance
(measure/output_check.py); else its cells are `wrong_output`, untimed. An out-of-memory cell becomes an `oom` row
with the allocator's first message line, its memory is released and the walk goes on; any other exception is an
`error` row. Faults (AC_FAULT's cell items) act as the cell starts, before its measured calls.
"""
from __future__ import annotations

import itertools
import logging
import time
import traceback

import torch

from ...faults import InjectedCrash
from ...measure.output_check import WrongOutput
from ...measure.run import Run
from ...measure.timing import StepTimer, synchronize
from ..transfer import Pool, cell_input
from .cells import Cell, _cell_columns, _first_line, faults, kills, more_repeats, timed_columns
from .python_model import PythonModel, Warmth, _oom_line, _release, oom_count
from .store import CellStore, _keep, _kept_rows, _next_attempt, _tracker_of

log = logging.getLogger(__name__)


def python_cells(model: PythonModel, cells: list[Cell], pool: Pool, warmup: int, repeats: int, run: Run,
                 store: CellStore | None = None, budget_s: float | None = None) -> list[dict]:
    """One row per cell; with a store, each kept as it completes, and those an interrupted attempt kept are
    taken back, not measured. The device's memory is returned between shapes and after a failed cell, not
    between the modes of one shape: they share its allocations, and only a cold cell (Warmth) has warm-up calls."""
    kept = _kept_rows(store, cells)
    tracker, injected, kill, rows = _tracker_of(kept, cells), faults(), kills(), []
    attempt, warmth = _next_attempt(kept), Warmth()
    for cell in cells:
        if cell.index in kept:
            rows.append(kept[cell.index])
            continue
        row = {**_cell_columns(cell), "attempt": attempt}
        skip = tracker.skip_message(cell)
        if skip is not None:
            row.update(status="oom", message=skip)
            rows.append(_keep(store, row, kill))
            continue
        if warmth.leaves_shape(cell):
            _release(run.device, collect=False)
        name = f"cell{cell.index}"
        data, model.build_s = None, None
        ooms = oom_count(run.device)
        try:
            with torch.no_grad(), run.phase(name):
                if injected.get(cell.index) == "oom":
                    raise torch.OutOfMemoryError("injected out of memory (AC_FAULT)")
                if injected.get(cell.index) == "crash":
                    raise InjectedCrash("injected crash (AC_FAULT)")
                if injected.get(cell.index) == "wrong":
                    raise WrongOutput("injected wrong output (AC_FAULT)")
                started = time.perf_counter()
                data = cell_input(pool, cell.batch, cell.resolution, cell.transfer, run.device)
                synchronize(run.device)
                prepare_s = time.perf_counter() - started
                if model.needs_reference(data.device_buffer.shape):
                    started = time.perf_counter()
                    data.load(pool)
                    prepare_s += time.perf_counter() - started
                    model.take_reference(data.to_device)
                row["build_s"] = model.build(data.model_input())
                row["warmup_calls"] = warmth.calls(cell, warmup)
                for _ in range(row["warmup_calls"]):
                    model.forward(data.model_input())
                started = time.perf_counter()
                if data.host is None:
                    data.load(pool)  # on the host while the device runs the warm-up
                row["prepare_s"] = prepare_s + time.perf_counter() - started
                synchronize(run.device)
                model.check(data.to_device)
                times, copies = StepTimer(run.device), StepTimer(run.device)
                first = None
                for done in itertools.count():
                    synchronize(run.device)
                    first = first or time.perf_counter()
                    if not more_repeats(done, time.perf_counter() - first, repeats, budget_s):
                        break
                    with times.step():
                        with copies.step():
                            data.copy()
                        model.forward(data.model_input())
                times_ms, h2d_ms = times.elapsed_ms(), copies.elapsed_ms()
            row.update(status="ok", message=None, h2d_bytes=data.nbytes,
                       **timed_columns(cell.batch, times_ms, h2d_ms), **run.measures(name))
            warmth.ran(cell)
        except WrongOutput as err:
            row.update(status="wrong_output", message=str(err))
        except Exception as err:
            # inside TorchScript's interpreter an oom is a RuntimeError: the allocator's count tells
            if isinstance(err, torch.OutOfMemoryError) or oom_count(run.device) > ooms:
                tracker.add(cell)
                row.update(status="oom", message=_oom_line(err))
            else:
                log.error("cell %s failed:\n%s", cell, traceback.format_exc())
                row.update(status="error", message=_first_line(err))
        finally:
            data = None
            if row.get("status") != "ok":
                row.setdefault("build_s", model.build_s)  # a build that failed took its time all the same
                _release(run.device, collect=True)
                warmth.released()
        if row["status"] != "ok" and name in run.sampler.phases:
            row.update(run.measures(name))
        log.info("cell %d (batch %d, %d px, %s): %s %s", cell.index, cell.batch, cell.resolution, cell.transfer,
                 row["status"], row.get("time_ms") or row.get("message"))
        rows.append(_keep(store, row, kill))
    _release(run.device, collect=False)
    return rows
