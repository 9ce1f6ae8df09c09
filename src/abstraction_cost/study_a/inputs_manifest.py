"""The sweep inputs' manifest (transfer.py writes the inputs): read it, record a dataset that could not be obtained,
and mark the sweep's rows when it was. Nothing here imports torch, so that the sweep's concat jobs do not load it,
nor polars where a sweep worker reads the manifest (transfer.py): a job's workers all start at once on its slot's
cores."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from ..data import prepared

if TYPE_CHECKING:
    import polars as pl

MANIFEST = "manifest.json"


def write_missing(out_dir: str | os.PathLike, message: str) -> dict:
    """Rule sweep_inputs on a dataset that could not be obtained: the manifest says so and why (no images)."""
    out = Path(out_dir)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    manifest = {"status": "missing", "message": message}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return manifest


def read_manifest(inputs_dir: str | os.PathLike) -> dict:
    manifest = json.loads((Path(inputs_dir) / MANIFEST).read_text())
    if manifest.get("status", "ok") != "ok":
        raise prepared.MissingDataset(manifest["message"])
    return manifest


def with_missing_inputs(df: pl.DataFrame, inputs_dir: str | os.PathLike) -> pl.DataFrame:
    """A sweep table's rows (sweep, sweep_kernels) when its inputs' dataset is missing: a not_run row says both
    reasons, a row that failed on reading the inputs (MissingDataset) is 'missing' (prepared.also_missing)."""
    try:
        read_manifest(inputs_dir)
        return df
    except prepared.MissingDataset as err:
        missing = str(err)
    import polars as pl
    marked = [prepared.also_missing(s, m, missing)
              if s == "not_run" or (s == "error" and (m or "").startswith(prepared.MissingDataset.__name__))
              else (s, m) for s, m in zip(df["status"], df["message"])]
    return df.with_columns(pl.Series("status", [s for s, _ in marked], dtype=pl.String),
                           pl.Series("message", [m for _, m in marked], dtype=pl.String))
