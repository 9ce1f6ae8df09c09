"""Shared fixtures; GPU-marked tests skip with a clear reason where torch sees no CUDA GPU."""
from pathlib import Path

import pytest
import torch
import yaml

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (torch.cuda.is_available() is False); run on the GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def smoke_config() -> dict:
    return yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())


@pytest.fixture(scope="module")
def program():
    """The LibTorch program, built against this machine's torch on first use."""
    from abstraction_cost.backends import native

    return native.ensure_built("libtorch")
