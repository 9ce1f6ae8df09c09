"""Study A's ResNet-50: torchvision's topology, with the stem taking the dataset's channel count.

Bottleneck stages [3, 4, 6, 3], stride on the 3×3 convolution, batch norm after every convolution, a skip
connection in every block, a projection on the first block of each stage, global average pooling, one linear
layer. native/libtorch writes the same network in C++; the parity tests bind the two.

torchvision is imported when a network is built, not with this module: importing it costs about 2.8 s (it imports
torch._dynamo), which the jobs that only launch a C++ program (the sweep's libtorch, torchscript-cpp, aoti and
cudnn jobs) would otherwise pay at start-up.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

if TYPE_CHECKING:
    from torchvision.models.resnet import ResNet


def resnet50(in_channels: int, num_classes: int) -> ResNet:
    from torchvision.models.resnet import Bottleneck, ResNet

    model = ResNet(Bottleneck, [3, 4, 6, 3], num_classes=num_classes)
    if in_channels != 3:
        model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return model
