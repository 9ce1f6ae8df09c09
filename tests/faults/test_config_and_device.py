"""Scenarios 8 and 9: a config with every kind of bad value; no GPU on a GPU config, NVML unavailable."""
import subprocess
import sys

import pytest
import torch

from abstraction_cost.measure import run as measure_run

from .conftest import EAGER_ROWS, REPO, faults_config


def _set(config: dict, dotted: str, value) -> dict:
    *parents, last = dotted.split(".")
    node = config
    for key in parents:
        node = node[key]
    node[last] = value
    return config


BAD_VALUES = [   # (dotted key, bad value, what the message must say besides the key)
    ("measure.repeets", 3, "unknown key"),
    ("measure.repeats", "three", "is not of type 'integer'"),
    ("seed", -1, "minimum"),
    ("study_a.training.datasets", [], "empty"),
    ("study_a.training.backends", [], "empty"),
    ("study_b.models.models.cpu", ["resnet9000"], "'resnet9000' is not one of"),
    ("study_a.training.datasets", ["imagenet"], "'imagenet' is not one of"),
]


def _check(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "abstraction_cost.config", str(path)], capture_output=True,
                          text=True, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("key, value, says", BAD_VALUES, ids=[f"{k}={v}" for k, v, _ in BAD_VALUES])
def test_bad_config_value_is_named_by_the_checker(work, key, value, says):
    work.write_config(_set(faults_config(), key, value))
    checked = _check(work.config_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    named = key.rsplit(".", 1)[0] if says == "unknown key" else key
    message = checked.stdout + checked.stderr
    assert f"config key '{named}" in message and says in message and "Traceback" not in message, message


def test_checker_accepts_every_shipped_config():
    for path in sorted((REPO / "config").glob("*.yaml")):
        checked = _check(path)
        assert checked.returncode == 0, (path, checked.stdout + checked.stderr)


def test_bad_configs_stop_snakemake_before_any_job(work):
    work.write_config(_set(faults_config(), "study_a.training.datasets", []))
    stopped = work.snakemake(EAGER_ROWS)
    assert stopped.returncode != 0 and "study_a.training.datasets" in stopped.output, stopped.output[-3000:]
    assert not (work.path / "results").exists()
    work.config_path.write_text(work.config_path.read_text().replace("measure:", "measure: [unclosed", 1))
    # Snakemake reads --configfile itself, before the pipeline's code runs: its message names no line ...
    stopped = work.snakemake(EAGER_ROWS)
    assert stopped.returncode != 0 and "not valid JSON or YAML" in stopped.output, stopped.output[-3000:]
    # ... the checker (docs/faults.md) names the file and the line
    checked = _check(work.config_path)
    message = checked.stdout + checked.stderr
    assert checked.returncode == 1 and f"{work.config_path}, line " in message and "not valid YAML" in message, message
    assert "Traceback" not in stopped.output + message


@pytest.mark.skipif(torch.cuda.is_available(), reason="shows what a machine without a GPU says")
def test_gpu_config_on_a_machine_without_gpu(work):
    work.write_config(_set(faults_config(), "device", "cuda"))
    stopped = work.snakemake(EAGER_ROWS)
    assert stopped.returncode != 0
    # the cause (the key, and no GPU) and the fix, before any job ran
    assert "'device'" in stopped.output and "no CUDA GPU" in stopped.output, stopped.output[-3000:]
    assert "device: auto" in stopped.output and "Traceback" not in stopped.output
    assert not (work.path / "results").exists()


def test_nvml_unavailable_on_a_gpu_machine(tmp_path, monkeypatch, caplog):
    """A GPU without a working NVML (no driver library, pynvml missing): the run goes on, and says so once, in
    its log and in its environment row's nvml_status; its power and memory columns are empty, not zeros."""
    import builtins

    from abstraction_cost import tables
    from abstraction_cost.measure import device as devices

    real_import = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError("libnvidia-ml.so.1: cannot open shared object file")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    monkeypatch.setattr(devices, "cuda_uuid", lambda device: "GPU-00000000-fake")
    env_path = tmp_path / "env.parquet"
    with caplog.at_level("WARNING"):
        with measure_run.measured_run(faults_config(), rule="t", job={}, env_path=env_path,
                                      device=torch.device("cpu")) as run:
            with run.phase("p"):
                pass
            measures = run.measures("p")
    row = tables.read("environment", env_path).row(0, named=True)
    assert row["nvml_status"].startswith("NVML unavailable") and "libnvidia-ml" in row["nvml_status"]
    assert measures["power_w_mean"] is None and measures["mem_used_mib_max"] is None
    assert any("NVML unavailable" in r.message and "nvidia-smi" in r.message for r in caplog.records), caplog.text
