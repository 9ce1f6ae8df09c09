"""Study A's ResNet-50: torchvision's network, written out here, with the stem taking the dataset's channel count.

Bottleneck stages [3, 4, 6, 3], stride on the 3×3 convolution, batch norm after every convolution, a skip
connection in every block, a projection on the first block of each stage, global average pooling, one linear
layer. native/libtorch writes the same network in C++; the parity tests bind the two, and tests/models/test_models.py
binds this one to torchvision's `resnet50` (the same parameter names and shapes, the same weights from the same
seed, the same logits, the same operators).

Written out rather than imported: importing torchvision imports torch._dynamo, seconds of every job's start-up
that lie outside its measured calls (docs/results/: the sweep's overhead).
"""
from __future__ import annotations

import os

import torch
from torch import nn

from . import weights_file

EXPANSION = 4  # a bottleneck's output channels over its width


def _conv(cin: int, cout: int, kernel: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=kernel, stride=stride, padding=kernel // 2, bias=False)


class Bottleneck(nn.Module):
    """1×1 down to `width`, 3×3 (carrying the stride), 1×1 up to width × 4; the skip adds before the last ReLU."""

    def __init__(self, cin: int, width: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = _conv(cin, width, 1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = _conv(width, width, 3, stride)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = _conv(width, width * EXPANSION, 1)
        self.bn3 = nn.BatchNorm2d(width * EXPANSION)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x
        if self.downsample is not None:  # after the main path, as torchvision launches it
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, in_channels: int, num_classes: int, blocks: tuple[int, ...] = (3, 4, 6, 3)):
        super().__init__()
        self.conv1 = _conv(in_channels, 64, 7, stride=2)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        cin = 64
        for i, (width, count) in enumerate(zip((64, 128, 256, 512), blocks)):
            stride = 1 if i == 0 else 2
            downsample = nn.Sequential(_conv(cin, width * EXPANSION, 1, stride), nn.BatchNorm2d(width * EXPANSION))
            stage = [Bottleneck(cin, width, stride, downsample)]
            stage += [Bottleneck(width * EXPANSION, width) for _ in range(count - 1)]
            setattr(self, f"layer{i + 1}", nn.Sequential(*stage))
            cin = width * EXPANSION
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():  # torchvision's init (models/init.py applies the configured scheme over it)
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50(in_channels: int, num_classes: int) -> ResNet:
    return ResNet(in_channels, num_classes)


def load_eval(weights_path: str | os.PathLike, in_channels: int, num_classes: int,
              device: torch.device | str = "cpu") -> ResNet:
    """The ResNet-50 with a weights file's weights, in evaluation mode on `device`: what every backend that
    evaluates, scripts, exports or checks against eager starts from."""
    return weights_file.load_into(resnet50(in_channels, num_classes), weights_path).eval().to(device)
