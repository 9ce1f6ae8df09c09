"""The cudnn backend in the pipeline, on any machine: its training and eval jobs write clean not_run rows where
there is no CUDA GPU, its algorithm columns reach the training, backend_eval and backend_comparison tables, and
every shipped config chooses its algorithms (study_a.cudnn). The program itself: tests/study_a/test_cudnn_program.py."""
import copy
import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from abstraction_cost import config as config_module
from abstraction_cost import tables
from abstraction_cost.config import TrainingSettings
from abstraction_cost.data import offline, prepared
from abstraction_cost.data import order as orders
from abstraction_cost.data.specs import spec
from abstraction_cost.measure.nvml import NvmlSampler
from abstraction_cost.models import init, resnet, weights_file
from abstraction_cost.report import study_a_backends
from abstraction_cost.programs import native
from abstraction_cost.study_a import cudnn
from abstraction_cost.study_a.comparison import compare as comparison, serial as eval_job
from tests.fixtures.repository import REPO

REASON = "the cudnn backend runs on a CUDA GPU only, and this run's device is cpu"


class _Run:
    def __init__(self, device):
        self.device = torch.device(device)
        self.sampler = NvmlSampler(None)


def _cpu_config(smoke_config) -> dict:
    config = copy.deepcopy(smoke_config)
    config["device"] = "cpu"  # the CPU path, also on a machine with a GPU
    config["measure"].update(warmup=0, repeats=2)
    return config


def _weights_and_data(tmp_path, config):
    ds = spec("synthetic-cifar10", config)
    shape = type(ds)(ds.name, ds.channels, 32, 32, ds.class_names)
    manifest = prepared.write(tmp_path / "data", "synthetic-cifar10", offline.synthetic(shape, 4, 2),
                              list(ds.class_names), [])
    weights_file.save(init.initialise(resnet.resnet50(3, 10), "zero-gamma", 0).state_dict(), tmp_path / "w.weights")
    return manifest


@pytest.mark.parametrize("implementation", cudnn.IMPLEMENTATIONS)
def test_eval_job_without_a_gpu_writes_one_not_run_row_and_no_logits(tmp_path, smoke_config, implementation):
    config = _cpu_config(smoke_config)
    config["study_a"]["backends"].update(batch_size=2, resolution=32, dataset="synthetic-cifar10")
    _weights_and_data(tmp_path, config)
    out = SimpleNamespace(table=str(tmp_path / "rows.parquet"), env=str(tmp_path / "env.parquet"),
                          logits=str(tmp_path / "logits.f32"))
    inputs = SimpleNamespace(input=str(tmp_path / "data"), weights=str(tmp_path / "w.weights"),
                             program=str(cudnn.program_path()))
    eval_job.run(SimpleNamespace(config=config, input=inputs, output=out, rule="eval_backend"), implementation)
    rows = tables.read("backend_eval", out.table)
    assert rows.height == 1 and rows["status"][0] == "not_run" and rows["message"][0] == REASON
    assert rows["backend"][0] == "cudnn" and rows["runtime"][0] == "cpp" and rows["conv_algo"][0] is None
    assert Path(out.logits).read_bytes() == b""


def test_training_job_without_a_gpu_writes_one_not_run_row(tmp_path, smoke_config):
    config = _cpu_config(smoke_config)
    _weights_and_data(tmp_path, config)
    epochs = config["study_a"]["training"]["epochs"]
    orders.write(tmp_path / "order.i32", 4, 0, epochs)
    out = SimpleNamespace(table=str(tmp_path / "rows.parquet"), env=str(tmp_path / "env.parquet"))
    inputs = SimpleNamespace(data=str(tmp_path / "data"), weights=str(tmp_path / "w.weights"),
                             order=str(tmp_path / "order.i32"), program=str(cudnn.program_path()))
    job = SimpleNamespace(config=config, input=inputs, output=out, rule="train_cudnn", log=[],
                          wildcards=SimpleNamespace(dataset="synthetic-cifar10", init="zero-gamma", seed="0",
                                                    items=lambda: {"dataset": "synthetic-cifar10"}.items()))
    runpy.run_path(str(REPO / "scripts" / "train_cudnn.py"), init_globals={"snakemake": job})
    rows = tables.read("training", out.table)
    assert rows.height == 1 and rows["backend"][0] == "cudnn" and rows["device"][0] == "cpu"
    assert rows["status"][0] == "not_run" and rows["message"][0] == REASON


def test_training_rows_carry_the_algorithm_choice_of_each_phase():
    phase = {"kind": "phase", "phase": "train", "epoch": 0, "loss": 2.3, "accuracy": 0.1, "samples": 4,
             "time_s": 0.1, "time_per_sample_ms": 25.0, "wall_s": 0.2, "start_monotonic_s": 1.0,
             "end_monotonic_s": 1.2, "alloc_peak_mib": 500.0, "conv_algo": "find", "workspace_mib": 64.0}
    result = native.Result(["ac_cudnn"], 3, [phase, {**phase, "phase": "eval", "workspace_mib": 96.0},
                                             {"kind": "error", "status": "oom", "message": "layer1.0 output: ..."}])
    rows = cudnn.training_rows(_Run("cpu"), result)
    assert [(r["phase"], r["status"], r.get("conv_algo"), r.get("workspace_mib")) for r in rows] == \
        [("train", "ok", "find", 64.0), ("eval", "ok", "find", 96.0), (None, "oom", None, None)]
    table = tables.frame("training", [{**dict.fromkeys(tables.schema("training")), **r} for r in rows])
    assert table["workspace_mib"].to_list() == [64.0, 96.0, None]


def test_comparison_keeps_the_algorithm_columns_and_a_not_run_cudnn(tmp_path):
    def rows(name, times, status="ok", **extra):
        base = {**dict.fromkeys(tables.schema("backend_eval")), "run_id": f"run-{name}", "implementation": name,
                "backend": eval_job.IMPLEMENTATIONS[name].backend, "runtime": "cpp", "method": "m", "device": "cuda",
                "batch_size": 2, "resolution": 32, "status": status, "message": None if status == "ok" else REASON,
                **extra}
        return [{**base, "repeat": i, "time_ms": t, "time_per_sample_ms": t / 2} for i, t in enumerate(times)] or [base]

    evals = tables.frame("backend_eval", rows("eager", [10.0, 11.0, 10.5])
                         + rows("cudnn", [8.0, 8.5, 8.2], conv_algo="heuristic", workspace_mib=12.0)
                         + rows("cudnn-graphs", [], status="not_run"))
    logits = np.arange(20, dtype="<f4").reshape(2, 10)
    paths = {}
    for name, data in (("eager", logits), ("cudnn", logits + 1e-6), ("cudnn-graphs", None)):
        paths[name] = tmp_path / f"{name}.f32"
        (data.tofile(paths[name]) if data is not None else paths[name].write_bytes(b""))
    out = {r["implementation"]: r for r in comparison.compare(evals, paths, 1e-4, seed=0)}
    cudnn_row = out["cudnn"]
    assert (cudnn_row["conv_algo"], cudnn_row["workspace_mib"], cudnn_row["parity_ok"]) == ("heuristic", 12.0, True)
    assert cudnn_row["speedup_vs_eager"] > 1
    assert out["cudnn-graphs"]["status"] == "not_run" and out["cudnn-graphs"]["time_per_sample_ms"] is None
    display = study_a_backends.comparison_display(tables.frame("backend_comparison", list(out.values())))
    assert display["implementation"].to_list() == ["eager", "cudnn", "cudnn-graphs"]
    assert display["convolution algorithms"].to_list() == [None, "heuristic, 12 MiB workspace", None]


@pytest.mark.parametrize("name", ["smoke", "gpu-smoke", "config", "paper"])
def test_every_shipped_config_runs_and_configures_cudnn(name):
    config = config_module.load(REPO / "config" / f"{name}.yaml")
    assert "cudnn" in config["study_a"]["training"]["backends"]
    assert {"cudnn", "cudnn-graphs"} <= set(config["study_a"]["backends"]["implementations"])
    assert config["study_a"]["cudnn"] == {"algo": "heuristic", "workspace_limit_mib": 1024}


def test_the_config_section_is_validated(smoke_config):
    config = copy.deepcopy(smoke_config)
    config["study_a"]["cudnn"]["algo"] = "fastest"
    with pytest.raises(config_module.ConfigError, match="'fastest' is not one of"):
        config_module.validate(config)
    del config["study_a"]["cudnn"]
    with pytest.raises(config_module.ConfigError, match="cudnn"):
        config_module.validate(config)


def test_settings_fit_the_program():
    settings = TrainingSettings(epochs=1, batch_size=4, eval_batch_size=2, lr=0.1, momentum=0.9, weight_decay=0.0)
    config = {"backend_flags": {"tf32": True, "cudnn_benchmark": True},
              "study_a": {"cudnn": {"algo": "find", "workspace_limit_mib": 0}}}
    command = cudnn.train_command(Path("ac_cudnn"), "d", {"channels": 3, "height": 8, "width": 8, "mean": [0.5] * 3,
                                                          "std": [0.2] * 3, "class_names": ["a", "b"],
                                                          "splits": {s: {"images": "i", "labels": "l", "count": 1}
                                                                     for s in ("train", "test")}},
                                  "w", "o", settings, config, torch.device("cuda"))
    flags = dict(zip(command[2::2], command[3::2]))
    assert (flags["--conv-algo"], flags["--workspace-limit-mib"], flags["--tf32"]) == ("find", "0", "1")


def test_the_benchmark_needs_a_gpu_and_writes_its_tables(tmp_path):
    import importlib.util
    import os
    import subprocess
    import sys

    script = REPO / "benchmarks" / "cudnn_backend.py"
    proc = subprocess.run([sys.executable, str(script), "--out", str(tmp_path / "b.json")], capture_output=True,
                          text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout=120)
    assert proc.returncode != 0 and "measures on a CUDA GPU; this machine has none" in proc.stderr
    spec_ = importlib.util.spec_from_file_location("cudnn_backend", script)
    bench = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(bench)
    rows = [{"kind": "eval", "implementation": "cudnn", "batch": 32, "status": "ok", "median_ms": 12.5,
             "per_sample_ms": 12.5 / 32, "nvml_peak_mib": 1594.0, "alloc_peak_mib": 985.0},
            {"kind": "train", "implementation": "eager", "batch": 32, "status": "error", "message": "x"}]
    bench.write(rows, tmp_path / "b.json", {"device": "test"})
    assert "| eval | cudnn | 32 | 12.50 | 0.3906 | 1594 | 985 |" in (tmp_path / "b.md").read_text()
    assert "| train | eager | 32 | error | | | |" in (tmp_path / "b.md").read_text()
