"""Shared fixtures; GPU-marked tests skip with a clear reason where torch sees no CUDA GPU."""
import subprocess
import sys
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
    from abstraction_cost.programs import native

    return native.ensure_built("libtorch")


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """config/smoke.yaml end to end through Snakemake, once per session: every test that reads a smoke run's results
    (tests/test_pipeline.py, the local run test_slurm compares with) reads this one."""
    work = tmp_path_factory.mktemp("smoke")
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(work),
               "--workflow-profile", str(REPO / "profiles" / "default"), "--configfile",
               str(REPO / "config" / "smoke.yaml"), "--cores", "2"]
    result = subprocess.run(command, capture_output=True, text=True)
    (work / "snakemake.out").write_text(result.stdout + result.stderr)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    return work
