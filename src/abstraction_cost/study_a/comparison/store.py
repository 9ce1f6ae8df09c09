"""What a backend-comparison job has finished, kept so that a killed job's rerun measures only the rest.

Rule eval_backend is one job per numerics. Under the interleaved protocol (eval_interleaved.py) its records are
kept per (invocation, implementation) by sweep_store.CellStore, under job_key. Under the serial protocol
(eval_job.run_serial) it measures every implementation in turn:

    store = NumericsStore(kept_dir(env output, numerics), job_key(config, numerics, inputs))
    for each implementation: store.restore(it, its outputs), or measure it, write its outputs, store.keep(...)
    store.clear() once every implementation's outputs are written

A finished implementation's three outputs (rows, environment row, logits) are copied into `<implementation>/` of
the store's
folder, made under a temporary name and renamed into place, so that folder is whole or absent. The store is no
output of the rule: Snakemake does not remove it with a failed job's outputs. A rerun with the same key copies
them back as they were (their run_ids and environment rows); a different key (the backends' settings, measure.*,
the backend flags, device, seed, the numerics, an input file's path, size or modification time, the torch
version) discards them: they measured something else. An implementation not kept when the job died is measured
again whole: its measuring is seconds.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Sequence

from ...measure.steps import StepStore, fingerprint

NAMES = ("rows.parquet", "env.parquet", "logits.f32")   # a step's outputs, in the order keep/restore take them


def kept_dir(env: str | os.PathLike, numerics: str) -> Path:
    """results/study_a/backends/eval/<numerics>.kept, beside the job's environment output."""
    return Path(env).parent / f"{numerics}.kept"


def _files(path: Path) -> list[tuple[str, int, int]]:
    found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in found if p.exists()]


def job_key(config: dict, numerics: str, inputs) -> str:
    """What a kept step depends on; not the list of numerics (each is its own job). The implementations are in
    it: the interleaved protocol's records are numbered by them, and each one's turns alternate with the others'."""
    named = dict(inputs.items()) if hasattr(inputs, "items") else dict(vars(inputs))
    backends = {k: v for k, v in config["study_a"]["backends"].items() if k != "numerics"}
    files = {name: _files(Path(str(path))) for name, path in sorted(named.items())}
    return fingerprint(backends, config["study_a"].get("cudnn"), config["measure"], config["backend_flags"],
                       config["device"], config["seed"], numerics, files)


class NumericsStore(StepStore):
    """A StepStore whose steps are implementations (serial protocol), each a folder of its output files."""

    def kept(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.name for p in self.directory.iterdir() if p.is_dir() and not p.name.startswith("."))

    def keep(self, step: str, paths: Sequence[str | os.PathLike]) -> None:
        """Copy the step's written outputs into the store, the folder renamed into place whole."""
        tmp = self.directory / f".{step}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for name, path in zip(NAMES, paths, strict=True):
            shutil.copyfile(path, tmp / name)
        os.replace(tmp, self.directory / step)

    def restore(self, step: str, paths: Sequence[str | os.PathLike]) -> bool:
        """Write a kept step's outputs back in place (each renamed into place); False where none is kept."""
        kept = self.directory / step
        if not kept.is_dir():
            return False
        for name, path in zip(NAMES, paths, strict=True):
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
            shutil.copyfile(kept / name, tmp)
            os.replace(tmp, path)
        return True
