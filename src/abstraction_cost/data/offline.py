"""The offline sources, in the prepared format: `synthetic-<dataset>` and `digits`.

- synthetic-<dataset>: deterministic images of that dataset's shape and class count. Each class has its own
  smooth random pattern; an image is that pattern plus noise, so a network that learns it has really learnt
  something (chance accuracy is 1/classes, a trained ResNet-50 gets far above it).
- digits: the 1,797 handwritten 8×8 digits bundled with scikit-learn, upsampled bilinearly to the configured
  resolution, split 80/20 by a fixed permutation (1,438 train, 359 test).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .specs import DatasetSpec

SYNTHETIC_SEED = 20210101
DIGITS_SPLIT_SEED = 0
DIGITS_TEST_FRACTION = 0.2


def synthetic(spec: DatasetSpec, train_samples: int, test_samples: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(SYNTHETIC_SEED + sum(spec.name.encode()))
    # class patterns: low-resolution noise upsampled, so they are smooth and survive strided convolutions
    coarse = torch.from_numpy(rng.standard_normal((spec.classes, spec.channels, 4, 4)).astype(np.float32))
    patterns = F.interpolate(coarse, size=(spec.height, spec.width), mode="bilinear", align_corners=False).numpy()
    splits = {}
    for split, count in (("train", train_samples), ("test", test_samples)):
        labels = rng.integers(0, spec.classes, count).astype(np.int64)
        noise = rng.standard_normal((count, spec.channels, spec.height, spec.width)).astype(np.float32)
        pixels = 128 + 40 * patterns[labels] + 30 * noise
        splits[split] = (np.clip(pixels, 0, 255).astype(np.uint8), labels)
    return splits


def digits(resolution: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    small = torch.from_numpy(bunch.images.astype(np.float32) / 16.0).unsqueeze(1)  # N×1×8×8 in [0, 1]
    big = F.interpolate(small, size=(resolution, resolution), mode="bilinear", align_corners=False)
    images = (big.clamp(0, 1) * 255).round().to(torch.uint8).numpy()
    labels = bunch.target.astype(np.int64)
    order = np.random.default_rng(DIGITS_SPLIT_SEED).permutation(len(labels))
    n_test = int(round(len(labels) * DIGITS_TEST_FRACTION))
    test, train = order[:n_test], order[n_test:]
    return {"train": (images[train], labels[train]), "test": (images[test], labels[test])}
