"""Convolution blocks (study Fig. 5.5): N = 1 .. N_max convolutions in sequence, speedup against N.

Block N is nn.Sequential of N convolutions: in_channels → channels, then channels → channels, kernel k,
stride 1, padding k // 2 (so the resolution is kept). The study's listing calls one convolution N times on the
same input and discards the results; a compiler removes such dead calls, so here each convolution feeds the next.
"""
from __future__ import annotations

from typing import Iterator

import torch
from torch import nn

from .cases import Builder, TimingSettings


def block(n: int, in_channels: int, channels: int, kernel: int) -> nn.Sequential:
    if n < 1:
        raise ValueError(f"a convolution block needs at least one convolution, got n={n}")
    layers = [nn.Conv2d(in_channels if i == 0 else channels, channels, kernel, stride=1, padding=kernel // 2)
              for i in range(n)]
    return nn.Sequential(*layers)


def builder(keys: dict, settings: TimingSettings, seed: int) -> Builder:
    def build(device: torch.device):
        torch.manual_seed(seed)
        model = block(keys["n"], keys["in_channels"], keys["channels"], keys["kernel"]).to(device).eval()
        shape = (keys["batch"], keys["in_channels"], keys["resolution"], keys["resolution"])
        sets = settings.input_sets(4 * keys["batch"] * keys["in_channels"] * keys["resolution"] ** 2)
        gen = torch.Generator(device="cpu").manual_seed(seed)
        return model, [(torch.randn(shape, generator=gen).to(device),) for _ in range(sets)]
    return build


def cases(config: dict, pair: str, settings: TimingSettings) -> Iterator[tuple[dict, Builder, str]]:
    c = config["study_b"]["blocks"]["conv_blocks"]
    for n in range(1, c["n_max"] + 1):
        keys = {"n": n, "in_channels": c["in_channels"], "channels": c["channels"], "kernel": c["kernel"],
                "batch": c["batch"], "resolution": c["resolution"][pair]}
        yield keys, builder(keys, settings, config["seed"]), f"conv block n={n}"
