"""Prepare any dataset the pipeline knows into the prepared format (data/prepared.py)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from . import offline, prepared
from .specs import spec


def prepare(name: str, config: dict, download_dir: str | os.PathLike, out_dir: str | os.PathLike) -> dict:
    """Write results/data/prepared/<name>; a real dataset whose download failed becomes a 'missing' manifest."""
    ds = spec(name, config)
    data = config["data"]
    if name == "digits":
        splits, sources = offline.digits(data["digits"]["resolution"]), [{"file": "sklearn.datasets.load_digits", "md5": None}]
    elif name.startswith("synthetic-"):
        splits = offline.synthetic(ds, data["synthetic"]["train_samples"], data["synthetic"]["test_samples"])
        sources = [{"file": f"synthetic, seed {offline.SYNTHETIC_SEED}", "md5": None}]
    else:
        from . import real

        record = json.loads((Path(download_dir) / "download.json").read_text())
        if record["status"] != "ok":
            return prepared.write_missing(out_dir, name, record["message"])
        splits, sources = real.load(ds, download_dir), record["files"]
    limits = {"train": data["limit_train"], "test": data["limit_test"]}
    splits = {k: (images[:limits[k]], labels[:limits[k]]) for k, (images, labels) in splits.items()}
    return prepared.write(out_dir, name, splits, list(ds.class_names), sources)
