"""The three init schemes of Study A, applied once per (dataset, scheme, seed) and saved to a weights file.

- pytorch-default: what nn.Conv2d, nn.Linear and nn.BatchNorm2d do on construction (Kaiming-uniform with
  a=sqrt(5), uniform bias, γ=1, β=0) — the initialisation the study found PyTorch applies silently.
- kaiming-normal-fan-out: torchvision's ResNet (Kaiming-normal, fan-out, ReLU gain on convolutions; γ=1, β=0;
  the linear layer keeps its default).
- zero-gamma: kaiming-normal-fan-out with γ=0 on the last batch norm of every bottleneck (Goyal et al. 2017).
"""
from __future__ import annotations

import torch
from torch import nn

from .resnet import Bottleneck

SCHEMES = ("pytorch-default", "kaiming-normal-fan-out", "zero-gamma")


def initialise(model: nn.Module, scheme: str, seed: int) -> nn.Module:
    if scheme not in SCHEMES:
        raise ValueError(f"unknown init scheme {scheme!r}; known: {SCHEMES}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear, nn.BatchNorm2d)):
                m.reset_parameters()
        if scheme != "pytorch-default":
            for m in model.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if scheme == "zero-gamma":
            for m in model.modules():
                if isinstance(m, Bottleneck):
                    nn.init.zeros_(m.bn3.weight)
    return model
