"""Finished steps of a long job, kept on disk so that a job killed after hours resumes where it stopped.

    store = StepStore(job_dir / "steps", fingerprint(config, model, pair))
    with measured_run(..., run_id=store.run_id, resumes=store.resumes) as run:
        rows = store.step("layers", lambda: measure_layers(...))   # kept rows, or measured now and kept
    write the job's tables, then store.clear()

Each step's rows are written atomically (a temporary file renamed into place) as the step completes. A rerun of
the same job (same fingerprint: the config it measures with, the job's wildcards, the torch version) takes them
back and measures only the rest, under the interrupted attempt's run_id, so every row of the job joins one
environment row; that row's `resumes` says how many interrupted attempts came before. A fingerprint that differs
(the config changed) discards the kept steps: they measured something else.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Callable

import torch

log = logging.getLogger(__name__)

LINEAGE = "lineage.json"


def fingerprint(*parts) -> str:
    """Hash of what the steps' rows depend on; plus the torch version, since it changes what is compiled."""
    text = json.dumps([*parts, torch.__version__], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _write_json(path: Path, obj) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(obj, f, default=lambda v: v.item() if hasattr(v, "item") else str(v))   # numpy scalars
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class StepStore:
    def __init__(self, directory: str | os.PathLike, key: str):
        self.directory = Path(directory)
        lineage = self._read(LINEAGE)
        if lineage is not None and lineage.get("key") == key:
            self.run_id, self.resumes = lineage["run_id"], lineage["attempts"]
            log.info("resuming run %s after %d interrupted attempt(s): steps kept: %s", self.run_id, self.resumes,
                     ", ".join(self.kept()) or "none")
        else:
            if self.directory.exists():   # another config's steps, or none finished: start over
                shutil.rmtree(self.directory)
            self.run_id, self.resumes = uuid.uuid4().hex[:16], 0
        self.directory.mkdir(parents=True, exist_ok=True)
        _write_json(self.directory / LINEAGE, {"key": key, "run_id": self.run_id, "attempts": self.resumes + 1})

    def _read(self, name: str):
        try:
            return json.loads((self.directory / name).read_text())
        except (OSError, ValueError):   # absent, or not written to the end: as if never written
            return None

    def _path(self, step: str) -> Path:
        return self.directory / f"{step}.json"

    def kept(self) -> list[str]:
        return sorted(p.stem for p in self.directory.glob("*.json") if p.name != LINEAGE) \
            if self.directory.is_dir() else []

    def step(self, name: str, measure: Callable[[], dict[str, list[dict]]]) -> dict[str, list[dict]]:
        """The step's rows by table: kept from an earlier attempt, or measured now and kept."""
        kept = self._read(self._path(name).name)
        if kept is not None:
            log.info("step %s: %s kept from an earlier attempt, not measured again", name,
                     ", ".join(f"{len(rows)} {table} rows" for table, rows in kept.items()))
            return kept
        rows = measure()
        for table_rows in rows.values():
            for row in table_rows:
                row.setdefault("run_id", self.run_id)
        _write_json(self._path(name), rows)
        return rows

    def clear(self) -> None:
        """The job's tables are written: its steps are no longer needed (a forced rerun measures afresh)."""
        shutil.rmtree(self.directory, ignore_errors=True)
