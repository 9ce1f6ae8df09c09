"""The block decompositions of Study B's six models compose to the models' own forward."""
from functools import lru_cache

import pytest
import torch

from abstraction_cost.models import blocks

# the study's block counts (SPEC.md) plus the one head block each decomposition ends in
EXPECTED_BLOCKS = {"alexnet": 14, "resnet50": 10, "mobilenet_v2": 20, "googlenet": 17, "squeezenet1_1": 14,
                   "densenet121": 13}


@lru_cache(maxsize=None)
def built(name):
    return blocks.build(name, seed=0, num_classes=10)


@pytest.mark.parametrize("name", blocks.MODELS)
def test_blocks_compose_to_the_forward(name):
    model = built(name)
    parts = blocks.blocks(name, model)
    assert len(parts) == EXPECTED_BLOCKS[name]
    assert parts[-1].name == "head"
    x = torch.randn(blocks.input_shape(2, 64), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(x.clone())
        got = blocks.sequential(parts)(x.clone())
    assert got.shape == (2, 10)
    assert torch.equal(got, want), f"{name}: max |diff| {(got - want).abs().max().item()}"


@pytest.mark.parametrize("name", blocks.MODELS)
def test_blocks_share_the_models_parameters(name):
    model = built(name)
    in_blocks = {id(p) for b in blocks.blocks(name, model) for p in b.module.parameters()}
    assert in_blocks == {id(p) for p in model.parameters()}


def test_seed_fixes_the_weights():
    a, b = (blocks.build("squeezenet1_1", seed=3) for _ in range(2))
    c = blocks.build("squeezenet1_1", seed=4)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters()))


def test_unknown_model_is_named():
    with pytest.raises(blocks.UnknownModel, match="vgg16"):
        blocks.build("vgg16", seed=0)
