"""The numerics a backend-comparison job has finished, kept so that a killed job's rerun measures only the rest.

Rule eval_backend is one job per implementation that measures every numerics in turn (backends/eval_job.py):

    store = NumericsStore(kept_dir(first table, implementation), job_key(config, implementation, inputs))
    for each numerics: store.restore(numerics, its outputs), or measure it, write its outputs, store.keep(...)
    store.clear() once every numerics' outputs are written

A finished numerics' three outputs (rows, environment row, logits) are copied into `<numerics>/` of the store's
folder, made under a temporary name and renamed into place, so that folder is whole or absent. The store is no
output of the rule: Snakemake does not remove it with a failed job's outputs. A rerun with the same key copies
them back as they were (their run_ids and environment rows); a different key (the backends' settings, measure.*,
the numerics flags, device, seed, the implementation, an input file's path, size or modification time, the torch
version) discards them: they measured something else. A numerics not kept when the job died is measured again
whole: its measuring is seconds.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Sequence

from ..measure.steps import StepStore, fingerprint

NAMES = ("rows.parquet", "env.parquet", "logits.f32")   # a numerics' outputs, in the order keep/restore take them


def kept_dir(table: str | os.PathLike, implementation: str) -> Path:
    """results/study_a/backends/eval/<implementation>.kept, beside the numerics' folders of the job's tables."""
    return Path(table).parent.parent / f"{implementation}.kept"


def _files(path: Path) -> list[tuple[str, int, int]]:
    found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in found if p.exists()]


def job_key(config: dict, implementation: str, inputs) -> str:
    """What a kept numerics' outputs depend on; not the list of numerics, so adding one keeps the others."""
    named = dict(inputs.items()) if hasattr(inputs, "items") else dict(vars(inputs))
    backends = {k: v for k, v in config["study_a"]["backends"].items() if k != "numerics"}
    files = {name: _files(Path(str(path))) for name, path in sorted(named.items())}
    return fingerprint(backends, config["study_a"].get("cudnn"), config["measure"], config["numerics"],
                       config["device"], config["seed"], implementation, files)


class NumericsStore(StepStore):
    """A StepStore whose steps are numerics, each a folder of the numerics' output files."""

    def kept(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.name for p in self.directory.iterdir() if p.is_dir() and not p.name.startswith("."))

    def keep(self, numerics: str, paths: Sequence[str | os.PathLike]) -> None:
        """Copy the numerics' written outputs into the store, the folder renamed into place whole."""
        tmp = self.directory / f".{numerics}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for name, path in zip(NAMES, paths, strict=True):
            shutil.copyfile(path, tmp / name)
        os.replace(tmp, self.directory / numerics)

    def restore(self, numerics: str, paths: Sequence[str | os.PathLike]) -> bool:
        """Write a kept numerics' outputs back in place (each renamed into place); False where none is kept."""
        kept = self.directory / numerics
        if not kept.is_dir():
            return False
        for name, path in zip(NAMES, paths, strict=True):
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
            shutil.copyfile(kept / name, tmp)
            os.replace(tmp, path)
        return True
