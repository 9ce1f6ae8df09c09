"""Matmul (study Fig. 5.1): square n×n float32 torch.mm, eager against compiled, on the CPU and the GPU.

Sizes are config (study_b.blocks.matmul.sizes.<pair>); the study went up to n = 17,500 on the GPU.
"""
from __future__ import annotations

from typing import Iterator

import torch

from .cases import Builder, TimingSettings

DTYPE = torch.float32


def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.mm(a, b)


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
