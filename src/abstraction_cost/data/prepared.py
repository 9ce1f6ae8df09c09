"""The prepared format: one copy of each dataset, read by every backend (Python and C++).

A prepared dataset is a directory:

    manifest.json          {"format": 1, "dataset", "status": "ok" | "missing", "message",
                            "channels", "height", "width", "class_names",
                            "mean", "std",            # per channel, of the train split's pixels / 255
                            "splits": {"train": {"count", "images", "labels"}, "test": {...}},
                            "sources": [{"file", "md5"}]}
    train-images.u8        uint8, count × channels × height × width, C order
    train-labels.i64       int64 little-endian, count
    test-images.u8, test-labels.i64

Backends copy the uint8 images to the device and normalise there: x = (u8 / 255 - mean) / std.
A dataset that could not be obtained is a directory with only a manifest whose status is "missing" and whose
message says why; load() raises MissingDataset with that message. Directories are written under a temporary
name and renamed, so a half-written one never looks prepared.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FORMAT = 1
SPLITS = ("train", "test")


class MissingDataset(RuntimeError):
    """The dataset could not be obtained; the message says why."""


@dataclass(frozen=True)
class Split:
    images: np.ndarray   # uint8, N×C×H×W (a read-only memory map when loaded)
    labels: np.ndarray   # int64, N


@dataclass(frozen=True)
class Prepared:
    manifest: dict
    train: Split
    test: Split

    @property
    def mean(self) -> list[float]:
        return self.manifest["mean"]

    @property
    def std(self) -> list[float]:
        return self.manifest["std"]

    @property
    def classes(self) -> int:
        return len(self.manifest["class_names"])


def _channel_stats(images: np.ndarray) -> tuple[list[float], list[float]]:
    n, c = images.shape[:2]
    mean, sq = np.zeros(c), np.zeros(c)
    for start in range(0, n, 4096):  # in chunks: PASCAL at high resolution does not fit twice in memory
        chunk = images[start:start + 4096].astype(np.float64) / 255.0
        mean += chunk.sum(axis=(0, 2, 3))
        sq += (chunk ** 2).sum(axis=(0, 2, 3))
    count = n * images.shape[2] * images.shape[3]
    mean /= count
    std = np.sqrt(np.maximum(sq / count - mean ** 2, 1e-12))
    return mean.tolist(), std.tolist()


def _atomic_dir(out_dir: Path):
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return out_dir, tmp


def _publish(tmp: Path, out_dir: Path) -> None:
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(tmp, out_dir)


def write(out_dir: str | os.PathLike, dataset: str, splits: dict[str, tuple[np.ndarray, np.ndarray]],
          class_names: list[str], sources: list[dict]) -> dict:
    """Write a prepared dataset; splits maps 'train'/'test' to (uint8 N×C×H×W images, integer labels)."""
    if sorted(splits) != sorted(SPLITS):
        raise ValueError(f"prepared dataset needs splits {SPLITS}, got {sorted(splits)}")
    shapes = {name: images.shape[1:] for name, (images, _) in splits.items()}
    for name, (images, labels) in splits.items():
        if images.dtype != np.uint8 or images.ndim != 4:
            raise ValueError(f"{dataset} {name} images: expected uint8 N×C×H×W, got {images.dtype} {images.shape}")
        if labels.shape != (images.shape[0],):
            raise ValueError(f"{dataset} {name} labels: expected shape ({images.shape[0]},), got {labels.shape}")
        if len(labels) and (labels.min() < 0 or labels.max() >= len(class_names)):
            raise ValueError(f"{dataset} {name} labels outside 0..{len(class_names) - 1}")
    if shapes["train"] != shapes["test"]:
        raise ValueError(f"{dataset}: train and test image shapes differ: {shapes}")
    out_dir, tmp = _atomic_dir(out_dir)
    c, h, w = shapes["train"]
    mean, std = _channel_stats(splits["train"][0])
    manifest = {"format": FORMAT, "dataset": dataset, "status": "ok", "message": None,
                "channels": c, "height": h, "width": w, "class_names": list(class_names),
                "mean": mean, "std": std, "splits": {}, "sources": sources}
    for name, (images, labels) in splits.items():
        files = {"images": f"{name}-images.u8", "labels": f"{name}-labels.i64"}
        np.ascontiguousarray(images).tofile(tmp / files["images"])
        np.ascontiguousarray(labels, dtype="<i8").tofile(tmp / files["labels"])
        manifest["splits"][name] = {"count": int(images.shape[0]), **files}
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
    _publish(tmp, out_dir)
    return manifest


def write_missing(out_dir: str | os.PathLike, dataset: str, message: str) -> dict:
    """Record that the dataset could not be obtained, and why: a manifest with status 'missing' and no data."""
    out_dir, tmp = _atomic_dir(out_dir)
    manifest = {"format": FORMAT, "dataset": dataset, "status": "missing", "message": message}
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
    _publish(tmp, out_dir)
    return manifest


def read_manifest(prepared_dir: str | os.PathLike) -> dict:
    path = Path(prepared_dir) / "manifest.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no manifest; the dataset was never prepared")
    return json.loads(path.read_text())


def load(prepared_dir: str | os.PathLike) -> Prepared:
    """Memory-map a prepared dataset; raises MissingDataset when it could not be obtained."""
    prepared_dir = Path(prepared_dir)
    manifest = read_manifest(prepared_dir)
    if manifest["status"] != "ok":
        raise MissingDataset(f"{manifest['dataset']}: {manifest['message']}")
    shape = (manifest["channels"], manifest["height"], manifest["width"])
    splits = {}
    for name in SPLITS:
        entry = manifest["splits"][name]
        images = np.memmap(prepared_dir / entry["images"], dtype=np.uint8, mode="r").reshape(entry["count"], *shape)
        labels = np.fromfile(prepared_dir / entry["labels"], dtype="<i8")
        if labels.shape != (entry["count"],):
            raise ValueError(f"{prepared_dir / entry['labels']}: expected {entry['count']} labels, found {labels.shape[0]}")
        splits[name] = Split(images, labels)
    return Prepared(manifest, splits["train"], splits["test"])
