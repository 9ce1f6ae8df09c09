"""The fault suite's workdir: the pipeline on a config smaller than smoke (one synthetic dataset, two epochs, no
compile-cache warm-up), and helpers that run Snakemake in it the way a user does, with fault hooks in its env."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DATASET = "synthetic-cifar10"
INIT = "kaiming-normal-fan-out"
EAGER_ROWS = f"results/study_a/train/eager/{DATASET}/{INIT}/seed0.rows.parquet"
LIBTORCH_ROWS = f"results/study_a/train/libtorch/{DATASET}/{INIT}/seed0.rows.parquet"
MATMUL_ROWS = "results/study_b/blocks/matmul/cpu-default.rows.parquet"
VISION_JOB = "results/study_b/models/jobs/cpu/squeezenet1_1"
VISION_WARM_UP = "results/study_b/compile-cache-manifests/models/cpu/squeezenet1_1.json"
COMPILE_CACHE = "results/study_b/compile-cache"   # common.smk's STUDY_B_CACHE_DIR


def faults_config() -> dict:
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config["data"]["synthetic"] = {"train_samples": 64, "test_samples": 32}
    training = config["study_a"]["training"]
    training.update(datasets=[DATASET], epochs=2, batch_size=32, eval_batch_size=32)
    config["study_b"]["fresh_compile_cache"] = True   # no warm-up job before the Study B jobs: seconds, not minutes
    config["study_b"]["models"]["models"]["cpu"] = ["squeezenet1_1"]
    return config


class Workdir:
    """A pipeline working directory and the commands a user would type in it."""

    def __init__(self, path: Path, config: dict):
        self.path = path
        self.config_path = path / "config.yaml"
        self.write_config(config)

    def write_config(self, config: dict) -> None:
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    def command(self, *targets: str) -> list[str]:
        return [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
                str(self.path), "--workflow-profile", str(REPO / "profiles" / "default"), "--configfile",
                str(self.config_path), "--cores", "all", *targets]

    def env(self, **faults: str) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AC_")}
        env["PYTHONPATH"] = str(REPO / "src")
        return {**env, **faults}

    def snakemake(self, *targets: str, timeout: float = 600, **faults: str) -> subprocess.CompletedProcess:
        result = subprocess.run(self.command(*targets), capture_output=True, text=True, env=self.env(**faults),
                                timeout=timeout)
        result.output = result.stdout + result.stderr
        return result

    def start(self, *targets: str, **faults: str) -> subprocess.Popen:
        return subprocess.Popen(self.command(*targets), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=self.env(**faults), start_new_session=True)

    def jobs_run(self, output: str) -> list[str]:
        """The rules Snakemake ran, from the 'rule X:' / 'localrule X:' header of each job in its output."""
        return [line.split()[1].rstrip(":") for line in output.splitlines()
                if line.startswith(("rule ", "localrule ")) and line.rstrip().endswith(":")]

    def leftovers(self) -> list[Path]:
        """Half-written files a crash could leave: the table writer's temporaries."""
        return [p for p in (self.path / "results").rglob("*") if ".tmp-" in p.name]

    def wait_for_log(self, log: str, text: str, proc: subprocess.Popen, timeout: float = 300) -> None:
        path = self.path / log
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if path.exists() and text in path.read_text(errors="replace"):
                return
            if proc.poll() is not None:
                raise AssertionError(f"snakemake ended before {log} said {text!r}:\n{proc.stdout.read()[-4000:]}")
            time.sleep(0.2)
        raise AssertionError(f"{log} never said {text!r} within {timeout} s")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(item.fspath).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.faults)


@pytest.fixture
def work(tmp_path) -> Workdir:
    return Workdir(tmp_path, faults_config())


def warm_cache_config() -> dict:
    config = faults_config()
    config["study_b"]["fresh_compile_cache"] = False
    return config


@pytest.fixture(scope="session")
def vision_warm_up(tmp_path_factory) -> Path:
    """The vision job's compile warm-up (rule compile_cache_model) of the fault config with the pipeline's shared
    Inductor cache, once per session: a workdir holding its manifest and the cache it filled."""
    work = Workdir(tmp_path_factory.mktemp("vision-warm-up"), warm_cache_config())
    run = work.snakemake(VISION_WARM_UP)
    assert run.returncode == 0, run.output[-4000:]
    return work.path


@pytest.fixture
def vision_work(tmp_path, vision_warm_up) -> Workdir:
    """`work` for the tests that fault the vision job, which compiles its model whole and block by block in every
    attempt: with the session's warm-up (its manifest and its Inductor cache copied in, so Snakemake has no warm-up
    job to run) each attempt compiles from the cache instead of cold, in seconds rather than a minute."""
    work = Workdir(tmp_path, warm_cache_config())
    shutil.copytree(vision_warm_up / COMPILE_CACHE, tmp_path / COMPILE_CACHE)
    (tmp_path / VISION_WARM_UP).parent.mkdir(parents=True)
    shutil.copy2(vision_warm_up / VISION_WARM_UP, tmp_path / VISION_WARM_UP)
    return work


def kill_group(proc: subprocess.Popen) -> None:
    """End a Snakemake started by a test, with whatever it started (its own session)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
