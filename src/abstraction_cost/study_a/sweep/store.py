"""Cells of one sweep job measured so far, kept on disk so that a sweep job killed after hours resumes at the first
cell it had not measured (measure/steps.py's store, one file per cell).

    store = CellStore(cells_dir(out.table), job_key(config, wildcards, inputs))
    with measured_run(..., run_id=store.run_id, resumes=store.resumes) as run:
        rows = python_cells(..., store=store)      # or native_cells(..., store=store)
    write the job's table, then store.clear()

Each cell's row (ok, oom or error) is written atomically as the cell completes, stamped with the job's run_id. A
rerun of the same job (same key: the sweep's grid and timing settings, numerics, device, seed, the backends'
dataset, the job's wildcards, its input files as they are on disk, the torch version) keeps those rows and walks
only the cells without one, the oom-skip rule seeded from the kept ooms, under the interrupted attempt's run_id.
A different key discards them: they measured something else.

A C++ program's cell that ended by a signal that stops jobs from outside (SIGKILL, SIGTERM, SIGINT, SIGHUP) is
in the table of a job that finishes, but is not kept: it may have been the job's own interruption (its Snakemake
killed, Ctrl-C, a time limit), which is no result of the cell, so a rerun measures it again.
"""
from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

from ...faults import kill_job
from ...measure.steps import StepStore, _write_json, fingerprint
from .cells import Cell, OomTracker

log = logging.getLogger(__name__)

INTERRUPTIONS = {-signal.SIGKILL, -signal.SIGTERM, -signal.SIGINT, -signal.SIGHUP}   # exit statuses


def cells_dir(table: str | os.PathLike) -> Path:
    """Beside the job's table, not among its outputs: Snakemake removes a failed job's outputs, not this."""
    table = Path(table)
    return table.with_name(table.name.removesuffix(".parquet").removesuffix(".rows") + ".cells")


def _files(path: Path) -> list[tuple[str, int, int]]:
    found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in found if p.exists()]


def job_key(config: dict, wildcards: dict, inputs: dict) -> str:
    """What a kept cell's row depends on; inputs by path, size and modification time (a rebuilt program or new
    weights measure something else)."""
    s = config["study_a"]["sweep"]
    grid = {k: s.get(k) for k in ("batches", "resolutions", "transfers", "warmup", "repeats", "cell_budget_s", "pool",
                                   "require_gpu", "compile_shapes")}
    files = {name: _files(Path(str(path))) for name, path in sorted(inputs.items())}
    return fingerprint(grid, config["backend_flags"], config["device"], config["seed"], config["measure"],
                       config["study_a"]["backends"], config["study_a"].get("cudnn"), dict(wildcards), files)


class CellStore(StepStore):
    """A StepStore whose steps are the sweep's cells: `cell<K>.json`, one row each."""

    @staticmethod
    def _name(index: int) -> str:
        return f"cell{index}"

    def rows(self) -> dict[int, dict]:
        """The kept rows by cell index (a file not written to the end is as if never written)."""
        kept = {}
        for name in self.kept():
            if name.startswith("cell") and name[4:].isdigit():
                row = self._read(self._path(name).name)
                if row is not None:
                    kept[int(name[4:])] = row
        return kept

    def keep(self, row: dict) -> dict:
        """Write one cell's row now, with the job's run_id (a row that has one keeps it)."""
        row = {**row, "run_id": row.get("run_id") or self.run_id}
        _write_json(self._path(self._name(row["cell"])), row)
        return row


def interrupted(row: dict) -> bool:
    """Whether a C++ cell's row may be the job's own interruption rather than a result of the cell."""
    return row.get("exit_status") in INTERRUPTIONS


def _kept_rows(store: CellStore | None, cells: list[Cell]) -> dict[int, dict]:
    kept = {i: row for i, row in (store.rows() if store is not None else {}).items() if i < len(cells)}
    if kept:
        log.info("%d of %d cells kept from an interrupted attempt of run %s, not measured again: %s", len(kept),
                 len(cells), store.run_id, ",".join(map(str, sorted(kept))))
    return kept


def _tracker_of(kept: dict[int, dict], cells: list[Cell]) -> OomTracker:
    """The oom-skip rule as the kept cells left it."""
    tracker = OomTracker()
    for index, row in kept.items():
        if _tried_oom(row):
            tracker.add(cells[index])
    return tracker


def _tried_oom(row: dict) -> bool:
    return row["status"] == "oom" and not str(row.get("message")).startswith("skipped:")


def _next_attempt(kept: dict[int, dict]) -> int:
    """Processes of the job are numbered on across a resume: the first after it follows the kept cells' last."""
    return max((row.get("attempt") or 0) for row in kept.values()) + 1 if kept else 0


def _keep(store: CellStore | None, row: dict, kill: set[int]) -> dict:
    """The cell's row, kept now (unless the job's interruption may have ended it: interrupted)."""
    if store is not None and not interrupted(row):
        row = store.keep(row)
    if row["cell"] in kill:
        kill_job()
    return row
