"""Sample orders: one permutation of the training set per (seed, epoch), shared by every backend.

File layout: int32 little-endian, epochs × count, C order; row e is the order of epoch e. A dataset that is
missing gets an empty file (count 0), so the rule still completes and the training rows say why.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def permutations(count: int, seed: int, epochs: int) -> np.ndarray:
    rng = np.random.default_rng([seed, count])
    return np.stack([rng.permutation(count) for _ in range(epochs)]).astype("<i4") if count else \
        np.zeros((epochs, 0), "<i4")


def write(path: str | os.PathLike, count: int, seed: int, epochs: int) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    permutations(count, seed, epochs).tofile(tmp)
    os.replace(tmp, path)


def read(path: str | os.PathLike, count: int, epochs: int) -> np.ndarray:
    data = np.fromfile(path, dtype="<i4")
    if data.size != count * epochs:
        raise ValueError(f"{path}: expected {epochs}×{count} indices, found {data.size}")
    return data.reshape(epochs, count)
