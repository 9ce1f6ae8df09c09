"""Study B's six vision models and their block decompositions.

Each model's forward is written as a sequence of top-level blocks whose composition equals the model's forward
(tests/models/test_blocks.py proves it for all six). The blocks are the units the study timed, subtracted and chose to
compile or not; they share the model's own modules (and parameters), they do not copy them.

| model | blocks | the study's blocks, then one `head` block for the rest of the forward |
| --- | --- | --- |
| alexnet | 14 | features.0 .. features.12 (13: conv, relu, pool as separate blocks); head = avgpool, flatten, classifier |
| resnet50 | 10 | conv1, bn1, relu, maxpool, layer1 .. layer4, avgpool; head = flatten, fc |
| mobilenet_v2 | 20 | features.0 .. features.18 (19: stem, 17 inverted residuals, last 1x1 conv); head = pool, flatten, classifier |
| googlenet | 17 | conv1, maxpool1, conv2, conv3, maxpool2, inception3a .. inception5b (16); head = avgpool, flatten, dropout, fc |
| squeezenet1_1 | 14 | features.0 .. features.12 (13: conv, relu, pool, fire modules); head = classifier, flatten |
| densenet121 | 13 | features.conv0 .. features.norm5 (12: stem, 4 dense blocks, 3 transitions, norm); head = relu, pool, flatten, classifier |

The study counted the feature blocks (AlexNet and SqueezeNet 13, MobileNetV2 19, DenseNet-121 12, GoogLeNet 16,
ResNet-50 conv1 .. layer4 then avgpool and fc); its counts leave the classifier out, but a decomposition whose
composition is the forward needs it, so each model ends in one `head` block. GoogLeNet is built without the
auxiliary classifiers (they only run in training) and without input transformation (only pretrained weights use it).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

MODELS = ("alexnet", "resnet50", "mobilenet_v2", "googlenet", "squeezenet1_1", "densenet121")


class UnknownModel(ValueError):
    """A model name outside MODELS."""


def build(name: str, seed: int, num_classes: int = 1000) -> nn.Module:
    """The torchvision model `name` with random weights drawn from `seed`, in eval mode."""
    if name not in MODELS:
        raise UnknownModel(f"unknown vision model {name!r}; known: {list(MODELS)}")
    import torchvision  # here, not at the top: it imports torch._dynamo (1.4-2.8 s)
    torch.manual_seed(seed)
    if name == "googlenet":
        model = torchvision.models.googlenet(weights=None, num_classes=num_classes, aux_logits=False,
                                             transform_input=False, init_weights=True)
    else:
        model = getattr(torchvision.models, name)(weights=None, num_classes=num_classes)
    return model.eval()


@dataclass(frozen=True)
class Block:
    name: str          # the module path in the model (features.3), or `head`
    kind: str          # what it is, for tables and figures (Conv2d, InvertedResidual, _DenseBlock, head)
    module: nn.Module


def _numbered(sequential: nn.Sequential, prefix: str) -> list[Block]:
    return [Block(f"{prefix}.{i}", type(m).__name__, m) for i, m in enumerate(sequential)]


def _named(model: nn.Module, names: list[str]) -> list[Block]:
    return [Block(n, type(model.get_submodule(n)).__name__, model.get_submodule(n)) for n in names]


def _head(*modules: nn.Module) -> Block:
    return Block("head", "head", nn.Sequential(*modules))


def _alexnet(m) -> list[Block]:
    return [*_numbered(m.features, "features"), _head(m.avgpool, nn.Flatten(1), m.classifier)]


def _resnet50(m) -> list[Block]:
    names = ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool"]
    return [*_named(m, names), _head(nn.Flatten(1), m.fc)]


def _mobilenet_v2(m) -> list[Block]:
    return [*_numbered(m.features, "features"),
            _head(nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(1), m.classifier)]


def _googlenet(m) -> list[Block]:
    if m.transform_input:
        raise ValueError("googlenet with transform_input=True has an input transform outside its blocks; "
                         "build it with blocks.build (transform_input=False)")
    names = ["conv1", "maxpool1", "conv2", "conv3", "maxpool2", "inception3a", "inception3b", "maxpool3",
             "inception4a", "inception4b", "inception4c", "inception4d", "inception4e", "maxpool4",
             "inception5a", "inception5b"]
    return [*_named(m, names), _head(m.avgpool, nn.Flatten(1), m.dropout, m.fc)]


def _squeezenet1_1(m) -> list[Block]:
    return [*_numbered(m.features, "features"), _head(m.classifier, nn.Flatten(1))]


def _densenet121(m) -> list[Block]:
    return [*[Block(f"features.{n}", type(c).__name__, c) for n, c in m.features.named_children()],
            _head(nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(1), m.classifier)]


_DECOMPOSE = {"alexnet": _alexnet, "resnet50": _resnet50, "mobilenet_v2": _mobilenet_v2,
              "googlenet": _googlenet, "squeezenet1_1": _squeezenet1_1, "densenet121": _densenet121}


def blocks(name: str, model: nn.Module) -> list[Block]:
    """The blocks of model `name` (built by `build`), in forward order."""
    if name not in _DECOMPOSE:
        raise UnknownModel(f"unknown vision model {name!r}; known: {list(MODELS)}")
    return _DECOMPOSE[name](model)


def sequential(blocks_: list[Block]) -> nn.Sequential:
    """The blocks composed; for a full decomposition this computes the model's forward."""
    return nn.Sequential(*(b.module for b in blocks_))


def input_shape(batch_size: int, resolution: int) -> tuple[int, int, int, int]:
    return (batch_size, 3, resolution, resolution)
