"""Readers of the four real datasets, from the files download.fetch() extracted (torchvision's layout).

load(spec, download_dir) -> {"train": (uint8 N×C×H×W, int64 N), "test": (...)} with the official splits:
- MNIST: train 60k / t10k 10k, idx files (big-endian header, uint8 pixels).
- CIFAR10: data_batch_1..5 / test_batch, pickled dicts of N×3072 uint8 rows (R, G, B planes of 32×32).
  Unpickled with a restricted unpickler that only builds numpy arrays: a pickle can run code.
- STL10: the 5k labelled train_X/train_y and 8k test_X/test_y (no unlabelled split); images are stored
  column-major (each channel 96×96 transposed), labels 1..10 on disk.
- PASCAL VOC 2012: ImageSets/Main/train.txt (train) and val.txt (test). Single-label as in Study A: the class
  of the FIRST <object> of the image's annotation XML, indexed in specs.VOC_CLASSES. Images are converted to
  RGB and resized to spec.height × spec.width (config data.voc_resolution) with PIL's bilinear filter
  (Image.Resampling.BILINEAR, which widens its support when downscaling, i.e. antialiased), ignoring aspect
  ratio, and written into one preallocated uint8 array per split: memory is N×3×H×W bytes, nothing more.
"""
from __future__ import annotations

import codecs
import concurrent.futures
import os
import pickle
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from .specs import VOC_CLASSES, DatasetSpec

MNIST_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
               "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
CIFAR10_BATCHES = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}
STL10_FILES = {"train": ("train_X.bin", "train_y.bin"), "test": ("test_X.bin", "test_y.bin")}
VOC_SPLIT_FILES = {"train": "train.txt", "test": "val.txt"}
VOC_DIR = Path("VOCdevkit") / "VOC2012"


def _read_idx(path: Path, ndim: int) -> np.ndarray:
    """An idx file of unsigned bytes (MNIST): magic 0x0000 08 <ndim>, ndim big-endian int32 sizes, data."""
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size < 4 + 4 * ndim or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08 or raw[3] != ndim:
        raise ValueError(f"{path}: not an idx file of uint8 with {ndim} dimensions (header {raw[:4].tolist()})")
    shape = tuple(int(s) for s in raw[4:4 + 4 * ndim].view(">i4"))
    data = raw[4 + 4 * ndim:]
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says {shape} ({int(np.prod(shape))} bytes), found {data.size} bytes")
    return data.reshape(shape)


def _mnist(root: Path) -> dict:
    raw = root / "MNIST" / "raw"
    splits = {}
    for split, (images_file, labels_file) in MNIST_FILES.items():
        images = _read_idx(raw / images_file, 3)
        labels = _read_idx(raw / labels_file, 1).astype(np.int64)
        splits[split] = (images[:, None, :, :].copy(), labels)
    return splits


def _numpy_core(module: str, name: str):
    import importlib

    try:  # numpy 2 moved numpy.core to numpy._core; the CIFAR pickles (numpy 1) name the old module
        return getattr(importlib.import_module(f"numpy._core.{module}"), name)
    except ImportError:
        return getattr(importlib.import_module(f"numpy.core.{module}"), name)


class _NumpyOnlyUnpickler(pickle.Unpickler):
    CORE = {("multiarray", "_reconstruct"), ("multiarray", "scalar"), ("numeric", "_frombuffer")}

    def find_class(self, module, name):
        core = module.removeprefix("numpy._core.").removeprefix("numpy.core.")
        if core != module and (core, name) in self.CORE:
            return _numpy_core(core, name)
        if module == "numpy" and name in ("ndarray", "dtype"):
            return getattr(np, name)
        if (module, name) == ("_codecs", "encode"):  # how protocol 2 spells bytes under Python 3
            return codecs.encode
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: only numpy arrays are expected")


def _cifar10(root: Path) -> dict:
    base = root / "cifar-10-batches-py"
    splits = {}
    for split, batches in CIFAR10_BATCHES.items():
        images, labels = [], []
        for batch in batches:
            with open(base / batch, "rb") as f:
                entry = _NumpyOnlyUnpickler(f, encoding="latin1").load()
            data = np.asarray(entry["data"], dtype=np.uint8)
            if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(entry["labels"]) != data.shape[0]:
                raise ValueError(f"{base / batch}: expected N×3072 data and N labels, "
                                 f"got {data.shape} and {len(entry['labels'])}")
            images.append(data.reshape(-1, 3, 32, 32))
            labels.append(np.asarray(entry["labels"], dtype=np.int64))
        splits[split] = (np.concatenate(images), np.concatenate(labels))
    return splits


def _stl10(root: Path) -> dict:
    base = root / "stl10_binary"
    splits = {}
    for split, (images_file, labels_file) in STL10_FILES.items():
        raw = np.fromfile(base / images_file, dtype=np.uint8)
        if raw.size % (3 * 96 * 96):
            raise ValueError(f"{base / images_file}: {raw.size} bytes is not a whole number of 3×96×96 images")
        images = np.ascontiguousarray(raw.reshape(-1, 3, 96, 96).transpose(0, 1, 3, 2))  # stored column-major
        labels = np.fromfile(base / labels_file, dtype=np.uint8).astype(np.int64) - 1
        if labels.shape != (images.shape[0],) or (labels.size and (labels.min() < 0 or labels.max() > 9)):
            raise ValueError(f"{base / labels_file}: expected {images.shape[0]} labels in 1..10")
        splits[split] = (images, labels)
    return splits


def voc_first_object_label(annotation: Path) -> int:
    """Index in VOC_CLASSES of the first <object>'s <name> in a VOC annotation file."""
    first = ET.parse(annotation).getroot().find("object")
    name = first.findtext("name") if first is not None else None
    if name is None:
        raise ValueError(f"{annotation}: no <object> with a <name>; cannot give the image a label")
    name = name.strip()
    if name not in VOC_CLASSES:
        raise ValueError(f"{annotation}: first object's class {name!r} is not one of {list(VOC_CLASSES)}")
    return VOC_CLASSES.index(name)


def _voc_image(path: Path, height: int, width: int) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as image:
        resized = image.convert("RGB").resize((width, height), Image.Resampling.BILINEAR)
    return np.asarray(resized).transpose(2, 0, 1)


def _voc2012(root: Path, height: int, width: int) -> dict:
    base = root / VOC_DIR
    workers = min(8, os.cpu_count() or 1)
    splits = {}
    for split, list_file in VOC_SPLIT_FILES.items():
        list_path = base / "ImageSets" / "Main" / list_file
        ids = [line.strip() for line in list_path.read_text().splitlines() if line.strip()]
        labels = np.array([voc_first_object_label(base / "Annotations" / f"{i}.xml") for i in ids], np.int64)
        images = np.empty((len(ids), 3, height, width), np.uint8)

        def fill(index: int) -> None:
            images[index] = _voc_image(base / "JPEGImages" / f"{ids[index]}.jpg", height, width)

        # JPEG decoding and resizing release the GIL; each worker holds one full-size image at a time
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(fill, range(len(ids))))
        splits[split] = (images, labels)
    return splits


def load(spec: DatasetSpec, download_dir: str | os.PathLike) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The official train/test splits of a real dataset, as uint8 N×C×H×W images and int64 labels."""
    root = Path(download_dir)
    readers = {"mnist": lambda: _mnist(root), "cifar10": lambda: _cifar10(root), "stl10": lambda: _stl10(root),
               "voc2012": lambda: _voc2012(root, spec.height, spec.width)}
    if spec.name not in readers:
        raise KeyError(f"{spec.name!r} is not a real dataset; real datasets: {sorted(readers)}")
    splits = readers[spec.name]()
    expected = (spec.channels, spec.height, spec.width)
    for split, (images, labels) in splits.items():
        if images.shape[1:] != expected:
            raise ValueError(f"{spec.name} {split} under {root}: images are {images.shape[1:]}, expected {expected}")
        if len(labels) and (labels.min() < 0 or labels.max() >= spec.classes):
            raise ValueError(f"{spec.name} {split} under {root}: labels outside 0..{spec.classes - 1}")
    return splits
