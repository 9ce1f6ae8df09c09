"""Matmul (study Fig. 5.1): square n×n float32 torch.mm, eager against compiled, on the CPU and the GPU; on the CPU
NumPy's matmul of the same arrays beside them (App. Fig. 1: NumPy against PyTorch).

Sizes are config (study_b.blocks.matmul.sizes.<pair>); the study went up to n = 17,500 on the GPU. NumPy's rows
(configuration `numpy`) are timed in the CPU pair's rounds, interleaved with interp and cpp, on the same float32
inputs: torch's CPU tensors seen as NumPy arrays without a copy (Tensor.numpy()), the result wrapped back the same
way, so a call is np.matmul and two views of a few hundred nanoseconds. Their output is checked against eager's
before timing, as a compiled case's is.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
import torch

from ..configurations import CONFIGURATIONS, Configuration
from .cases import Builder, TimingSettings

DTYPE = torch.float32


def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.mm(a, b)


def numpy_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.matmul(a.numpy(), b.numpy()))


def extras(pair: str) -> list[tuple[Configuration, Callable]]:
    """What the pair's cases time beside eager and compiled: NumPy on the CPU pair."""
    return [(CONFIGURATIONS["numpy"], numpy_mm)] if pair == "cpu" else []


def builder(n: int, settings: TimingSettings, seed: int) -> Builder:
    def build(device: torch.device):
        gen = torch.Generator(device="cpu").manual_seed(seed + n)
        sets = settings.input_sets(2 * n * n * DTYPE.itemsize)
        inputs = [tuple(torch.randn(n, n, generator=gen, dtype=DTYPE).to(device) for _ in range(2))
                  for _ in range(sets)]
        return mm, inputs
    return build


def cases(config: dict, pair: str, settings: TimingSettings) -> Iterator[tuple[dict, Builder, str]]:
    for n in config["study_b"]["blocks"]["matmul"]["sizes"][pair]:
        yield {"n": n, "dtype": "float32"}, builder(n, settings, config["seed"]), f"matmul n={n}"
