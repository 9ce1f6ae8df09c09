"""Shared fixtures; GPU-marked tests skip with a clear reason where torch sees no CUDA GPU."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

REPO = Path(__file__).resolve().parents[1]


# Modules whose tests share a session fixture or a machine-wide service, by the worker group they run in
# (pytest-xdist): the smoke run and the local SLURM controller; the faults' vision warm-up.
SHARED = {"tests/test_pipeline.py": "smoke run, SLURM", "tests/test_slurm.py": "smoke run, SLURM",
          "tests/test_slurm_requests.py": "smoke run, SLURM", "tests/faults/test_crashes.py": "vision warm-up",
          "tests/faults/test_resume.py": "vision warm-up"}
# The longest chains of fixtures, by --durations on a 2-core CI machine (the smoke run then the SLURM runs: about
# 1,700 s; the offline default run; the vision warm-up), handed out first: xdist hands out the modules with most
# tests first, and a long chain started late ends late whatever the other worker has left
LONGEST_FIRST = ("smoke run, SLURM", "tests/faults/test_offline_default.py", "vision warm-up")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest -n N: each module's tests on one worker, so that its module-scoped fixtures (an offline run, a
    built program) are made once, and the modules of SHARED together; LONGEST_FIRST first. Not xdist's loadgroup:
    with pytest 9.2 it ignores xdist_group marks (pytest-dev/pytest-xdist#1386)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return SHARED.get(module, module)

        def _assign_work_unit(self, node) -> None:
            for scope in reversed(LONGEST_FIRST):
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return ByModule(config, log)


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
