"""The serial walk of a C++ implementation: its program's sweep command line (native/common/sweep.h's flags) and the
loop that runs the program until every cell has a row. The program streams its records; when it dies, the loop
restarts it from the cell after the one it died in (--start-cell), which becomes an `error` row with the exit
status, and tells it which cells were oom (--oom-at) so the skip rule holds. The program writes each measured
cell's last logits (--logits-dir), which the job checks against eager's once the program has ended (check.py): a
cell that differs becomes `wrong_output` and loses its times.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

import torch

from ... import implementations
from ...measure.run import Run
from ...programs import native
from .. import aoti_dynamic, cudnn
from .cells import Cell, SweepSettings, _cell_columns, kills, timed_columns
from .store import CellStore, _keep, _kept_rows, _next_attempt, _tracker_of, _tried_oom

log = logging.getLogger(__name__)

# implementation -> the C++ program's --model (implementations.py)
NATIVE_MODELS = {name: impl.native_model for name, impl in implementations.REGISTRY.items()
                 if impl.native_model is not None and "sweep" in impl.experiments}


def sweep_command(program, implementation: str, inputs, manifest: dict, settings: SweepSettings, config: dict,
                  device: torch.device, classes: int, start_cell: int = 0, oom_at: str = "",
                  logits_dir: Path | None = None) -> list[str]:
    """ac_libtorch sweep (or ac_cudnn sweep): flags of native/{libtorch,cudnn}/sweep.cpp and native/common/sweep.h."""
    model = NATIVE_MODELS[implementation]
    numbers = lambda xs: ",".join(repr(float(x)) for x in xs)  # noqa: E731
    command = [program, "sweep", "--model", model, *native.common_flags(config, device),
               "--channels", manifest["channels"], "--pool", manifest["pool"], "--inputs", inputs.inputs,
               "--mean", numbers(manifest["mean"]), "--std", numbers(manifest["std"]),
               "--batches", ",".join(map(str, settings.batches)),
               "--resolutions", ",".join(map(str, settings.resolutions)),
               "--warmup", settings.warmup, "--repeats", settings.repeats,
               "--cell-budget-s", settings.cell_budget_s or 0,
               "--transfers", ",".join(settings.transfers), "--start-cell", start_cell]
    if oom_at:
        command += ["--oom-at", oom_at]
    if logits_dir is not None:
        command += ["--logits-dir", logits_dir]
    if model == "libtorch" or model in cudnn.IMPLEMENTATIONS:
        command += ["--weights", inputs.weights, "--classes", classes]
    elif model == "torchscript":
        command += ["--module", inputs.module]
    else:
        command += ["--module", Path(inputs.package) / aoti_dynamic.PACKAGE]
    if model in cudnn.IMPLEMENTATIONS:  # study_a.cudnn's algorithm choice instead of torch's cudnn.benchmark
        command = cudnn.with_conv_flags([str(c) for c in command], config)
    return [str(c) for c in command]


def _native_row(record: dict, attempt: int, run: Run) -> dict:
    row = {"cell": record["cell"], "batch_size": record["batch"], "resolution": record["resolution"],
           "transfer": record["transfer"], "status": record["status"], "message": record.get("message"),
           "attempt": attempt}
    if "start_monotonic_s" in record:
        name = f"cell{record['cell']}"
        native.mark_phase(run, name, record)
        row.update(native.phase_measures(run, name, record))
    if record["status"] == "ok":
        row.update(h2d_bytes=record["h2d_bytes"], prepare_s=record["prepare_s"],
                   warmup_calls=record["warmup_calls"],
                   **timed_columns(record["batch"], record["times_ms"], record["h2d_ms"]))
    return row


def native_cells(cells: list[Cell], command_for, run: Run, name: str = "program",
                 store: CellStore | None = None) -> list[dict]:
    """Runs the program until every cell has a row, restarting it after a crash from the next cell.
    command_for(start_cell, oom_at) is its command line (sweep_command's, or a test program's). With a store,
    each cell's row is kept as its record arrives, and an interrupted attempt's kept cells are not measured: the
    program starts at the first cell without a row, told the kept ooms (--oom-at)."""
    rows = _kept_rows(store, cells)
    tracker, kill = _tracker_of(rows, cells), kills()
    start, attempt = _next_missing(rows, cells, 0), _next_attempt(rows)
    while start < len(cells):
        seen = {"started": False}
        records = []
        launched = time.perf_counter()

        def on_record(record: dict) -> None:
            if record["kind"] == "sweep_start":
                seen["started"] = True
                log.info("%s: program started in %.1f s (from cell %d)", name, time.perf_counter() - launched, start)
            elif record["kind"] == "cell":
                records.append(record)
                if _tried_oom(record):
                    tracker.add(cells[record["cell"]])
                if record["cell"] not in rows:
                    rows[record["cell"]] = _keep(store, _native_row(record, attempt, run), kill)

        command = command_for(start, tracker.flag())
        result = native.launch(command, on_record=on_record, logger=log)
        if result.returncode == 0 and result.of_kind("sweep_done"):
            break
        status, message = result.failure() or ("error", "the program ended without its sweep_done record")
        if not seen["started"]:  # it never reached the cells: every remaining cell fails the same way
            for cell in cells[start:]:
                rows.setdefault(cell.index, {**_cell_columns(cell), "status": status, "message": message,
                                             "exit_status": result.returncode, "attempt": attempt})
            break
        crashed = max((r["cell"] for r in records), default=start - 1) + 1
        if crashed >= len(cells):
            break
        cell = cells[crashed]
        start = _next_missing(rows, cells, crashed + 1)
        log.warning("%s died in cell %d (batch %d, %d px, %s): %s; restarting from cell %d", name,
                    crashed, cell.batch, cell.resolution, cell.transfer, message, start)
        if crashed not in rows:
            rows[crashed] = _keep(store, {**_cell_columns(cell), "status": status, "message": message,
                                          "exit_status": result.returncode, "attempt": attempt}, kill)
        attempt += 1
    return [rows[i] for i in sorted(rows)]


def _next_missing(rows: dict[int, dict], cells: list[Cell], after: int) -> int:
    """The first cell from `after` on without a row (len(cells): none)."""
    return next((c.index for c in cells[after:] if c.index not in rows), len(cells))
