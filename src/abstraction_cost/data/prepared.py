"""The prepared format: one copy of each dataset, read by every backend (Python and C++).

A prepared dataset is a directory:

    manifest.json          {"format": 2, "dataset", "status": "ok" | "missing", "message",
                            "channels", "height", "width", "class_names",
                            "mean", "std",            # per channel, of the train split's pixels / 255
                            "splits": {"train": {"count", "images", "labels"}, "test": {...}},
                            "files": {"<file>": {"bytes", "sha256", "mtime_ns"}},   # every data file
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

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FORMAT = 2
SPLITS = ("train", "test")
REBUILD = ("rebuild it by rerunning snakemake (e.g. `snakemake --cores all`): each run finds a damaged prepared "
           "dataset when it starts and prepares it again")


class MissingDataset(RuntimeError):
    """The dataset could not be obtained; the message says why."""


class DamagedDataset(RuntimeError):
    """A prepared file is not what its manifest records; the message names the file and how to rebuild it."""


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
    manifest["files"] = {name: _record(tmp / name) for split in manifest["splits"].values()
                         for name in (split["images"], split["labels"])}
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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _record(path: Path) -> dict:
    st = path.stat()
    return {"bytes": st.st_size, "sha256": _sha256(path), "mtime_ns": st.st_mtime_ns}


def _recorded(manifest: dict) -> dict[str, dict]:
    """{file: {bytes, sha256, mtime_ns}}; a format-1 dataset (before checksums) has its sizes from its shapes only,
    so that upgrading does not make every prepared dataset, and every result read from it, be made again."""
    if manifest.get("format") == FORMAT:
        return manifest["files"]
    if manifest.get("format") != 1:
        raise DamagedDataset(f"prepared format {manifest.get('format')!r} is unknown (this code writes "
                             f"{FORMAT}); {REBUILD}")
    pixels = manifest["channels"] * manifest["height"] * manifest["width"]
    files = {}
    for split in manifest["splits"].values():
        files[split["images"]] = {"bytes": split["count"] * pixels, "sha256": None, "mtime_ns": None}
        files[split["labels"]] = {"bytes": split["count"] * 8, "sha256": None, "mtime_ns": None}
    return files


def verify(prepared_dir: str | os.PathLike, manifest: dict | None = None, trust_mtime: bool = False) -> dict:
    """The manifest of a prepared dataset whose every data file has its recorded size and sha256; else
    DamagedDataset naming the file. trust_mtime: a file with its recorded size and mtime is not hashed again.
    A 'missing' dataset has no files to verify; one of format 1 only sizes (_recorded)."""
    prepared_dir = Path(prepared_dir)
    manifest = read_manifest(prepared_dir) if manifest is None else manifest
    if manifest.get("status") != "ok":
        return manifest
    for name, want in _recorded(manifest).items():
        path = prepared_dir / name
        try:
            st = path.stat()
        except FileNotFoundError:
            raise DamagedDataset(f"{path}: the file is gone; {REBUILD}") from None
        if st.st_size != want["bytes"]:
            raise DamagedDataset(f"{path}: {st.st_size} bytes, but {want['bytes']} were written (truncated or "
                                 f"overwritten); {REBUILD}")
        if want["sha256"] is None or trust_mtime and st.st_mtime_ns == want["mtime_ns"]:
            continue
        if (actual := _sha256(path)) != want["sha256"]:
            raise DamagedDataset(f"{path}: sha256 {actual}, but {want['sha256']} was written (its contents "
                                 f"changed); {REBUILD}")
    return manifest


def check(prepared_dir: str | os.PathLike) -> str | None:
    """Why an existing prepared dataset cannot be used (damaged, unreadable manifest), or None: verify() with
    trusted mtimes, for every Snakemake start."""
    try:
        verify(prepared_dir, trust_mtime=True)
    except DamagedDataset as err:
        return str(err)
    except (OSError, ValueError, KeyError, TypeError) as err:  # no or an unreadable manifest.json
        return f"{prepared_dir}: unreadable manifest ({type(err).__name__}: {err}); {REBUILD}"
    return None


def missing_reason(prepared_dir: str | os.PathLike) -> str | None:
    """MissingDataset's message for a dataset that could not be obtained ('<dataset>: <why>; to retry: ...'),
    or None when it was prepared."""
    manifest = read_manifest(prepared_dir)
    return None if manifest["status"] == "ok" else f"{manifest['dataset']}: {manifest['message']}"


def also_missing(status: str, message: str | None, missing: str) -> tuple[str, str]:
    """(status, message) of a row whose dataset is missing (`missing`, MissingDataset's message): 'missing', and
    a row not run for a reason of its own (no GPU) says both, so neither is lost from the report."""
    if status == "not_run":
        return "missing", f"{missing}; and not_run on this machine even with it: {message}"
    return "missing", missing


def load(prepared_dir: str | os.PathLike) -> Prepared:
    """Memory-map a verified prepared dataset; raises MissingDataset when it could not be obtained and
    DamagedDataset when a file is not the one written."""
    prepared_dir = Path(prepared_dir)
    manifest = read_manifest(prepared_dir)
    if manifest["status"] != "ok":
        raise MissingDataset(f"{manifest['dataset']}: {manifest['message']}")
    verify(prepared_dir, manifest)
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
