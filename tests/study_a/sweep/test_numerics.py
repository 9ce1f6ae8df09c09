"""The sweep's numerics: each job sets its numerics in its process before the model, measures each in turn, passes
TF32 to the C++ programs, and leaves them not_run under bf16-autocast; the config schema's sweep checks."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from abstraction_cost.programs import native
from abstraction_cost.study_a import transfer
from abstraction_cost.study_a.sweep import cells as sweep_cells, native_walk, python_model, serial as sweep
from abstraction_cost.study_a.sweep import store as sweep_store
from tests.fixtures.repository import REPO

from tests.fixtures.sweep_fakes import _numerics_job, pool_dir, process_numerics  # noqa: F401 (fixtures)


@pytest.mark.parametrize("numerics,tf32", [("tf32", True), ("fp32", False)])
def test_sweep_job_sets_its_numerics_in_the_process_before_the_model(pool_dir, tmp_path, monkeypatch, numerics,
                                                                     tf32, process_numerics):
    """The job's TF32 flags are its numerics' (whatever the top-level numerics.tf32 says), set before the model
    is built and recorded in its environment row; every row is labelled."""
    from abstraction_cost import tables
    seen = {}
    built = python_model.PythonModel.__init__

    def spy(self, *args, **kwargs):
        seen.update(cudnn=torch.backends.cudnn.allow_tf32, matmul=torch.backends.cuda.matmul.allow_tf32)
        built(self, *args, **kwargs)
    monkeypatch.setattr(python_model.PythonModel, "__init__", spy)
    job = _numerics_job(pool_dir, tmp_path, "eager", numerics)
    job.config["backend_flags"]["tf32"] = not tf32  # the top-level setting must not leak into the job
    sweep.run(job)
    df, env = tables.read("sweep", job.output.tables[0]), tables.read("environment", job.output.envs[0])
    assert df["status"].to_list() == ["ok", "ok"] and df["numerics"].to_list() == [numerics] * 2
    assert seen == {"cudnn": tf32, "matmul": tf32}
    assert env["tf32_cudnn"].to_list() == [tf32] and env["tf32_matmul"].to_list() == [tf32]
    assert f"numerics={numerics}" in env["job"][0]


def test_one_sweep_job_measures_each_numerics_in_turn_in_one_process(pool_dir, tmp_path, monkeypatch,
                                                                     process_numerics):
    """One job per implementation: each numerics gets its own model built under its own flags, its own table and
    environment row (own run_id); the kept cells are cleared only after the last numerics is written."""
    from abstraction_cost import tables
    from abstraction_cost.study_a.sweep.store import cells_dir
    seen = []
    built = python_model.PythonModel.__init__

    def spy(self, *args, **kwargs):
        seen.append((torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32))
        built(self, *args, **kwargs)
    monkeypatch.setattr(python_model.PythonModel, "__init__", spy)
    job = _numerics_job(pool_dir, tmp_path, "eager", "fp32", "tf32")
    cleared = []
    monkeypatch.setattr(sweep_store.CellStore, "clear", lambda self: cleared.append(self.directory))
    sweep.run(job)
    assert seen == [(False, False), (True, True)]
    rows = [tables.read("sweep", t) for t in job.output.tables]
    envs = [tables.read("environment", e) for e in job.output.envs]
    assert [r["numerics"].unique().to_list() for r in rows] == [["fp32"], ["tf32"]]
    assert all(r["status"].to_list() == ["ok", "ok"] for r in rows)
    assert [e["tf32_cudnn"].to_list() for e in envs] == [[False], [True]]
    assert rows[0]["run_id"][0] != rows[1]["run_id"][0]
    assert cleared == [cells_dir(t) for t in job.output.tables]


def test_sweep_job_refuses_an_unknown_numerics_naming_the_key(pool_dir, tmp_path):
    job = _numerics_job(pool_dir, tmp_path, "eager", "fp16")
    with pytest.raises(ValueError, match=r"unknown numerics 'fp16' \(config key study_a\.sweep\.numerics\)"):
        sweep.run(job)


@pytest.mark.parametrize("numerics,flag", [("tf32", "1"), ("fp32", "0")])
def test_libtorch_sweep_program_runs_under_the_jobs_tf32(pool_dir, tmp_path, numerics, flag):
    """The C++ program gets the job's numerics as --tf32 and runs under it: its start record reads the flags
    back from ATen."""
    from abstraction_cost.measure import numerics as nx
    from abstraction_cost.models import resnet, weights_file
    program = native.ensure_built("libtorch")
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 5).state_dict(), weights)
    config = nx.job_config({"backend_flags": {"tf32": False, "cudnn_benchmark": False}}, numerics,
                           "study_a.sweep.numerics")
    settings = SimpleNamespace(batches=(1,), resolutions=(8,), transfers=("uint8-pinned",), warmup=0, repeats=1,
                               cell_budget_s=None)
    inputs = SimpleNamespace(inputs=str(pool_dir), weights=str(weights))
    command = native_walk.sweep_command(program, "libtorch", inputs, transfer.read_manifest(pool_dir), settings, config,
                                        torch.device("cpu"), 5)
    assert command[command.index("--tf32") + 1] == flag
    result = native.launch(command)
    assert result.returncode == 0, result.stderr_tail
    start = result.of_kind("start")[0]
    assert start["tf32_cudnn"] is (flag == "1") and start["tf32_matmul"] is (flag == "1")


def test_bf16_autocast_runs_python_and_leaves_cpp_not_run(pool_dir, tmp_path, process_numerics):
    """bf16-autocast: eager's forward runs under torch.autocast (bfloat16 logits); the C++ program, which has no
    autocast, is not_run with the reason, never silently fp32."""
    from abstraction_cost import tables
    from abstraction_cost.measure import numerics as nx
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    model = python_model.PythonModel("eager", SimpleNamespace(weights=str(weights)), 3, 10, torch.device("cpu"),
                                     "bf16-autocast")
    with torch.no_grad():
        assert model.forward(torch.zeros(1, 3, 8, 8)).dtype == torch.bfloat16
    job = _numerics_job(pool_dir, tmp_path, "libtorch", "bf16-autocast")
    sweep.run(job)
    df = tables.read("sweep", job.output.tables[0])
    assert set(df["status"]) == {"not_run"} and set(df["message"]) == {nx.NO_CPP_AUTOCAST}
    assert set(df["numerics"]) == {"bf16-autocast"} and df.height == 2


@pytest.mark.parametrize("key,value,words", [
    ("batches", [8, 0], "study_a.sweep.batches.1"),
    ("resolutions", [64, "128"], "study_a.sweep.resolutions.1"),
    ("transfers", ["float16-pinned"], "study_a.sweep.transfers.0"),
    ("implementations", ["tensorrt"], "study_a.sweep.implementations.0"),
    ("numerics", ["fp32", "fp16"], "study_a.sweep.numerics.1"),
])
def test_config_schema_refuses_bad_sweep_values_naming_the_key(key, value, words):
    from abstraction_cost import config as config_module
    config = config_module.load(REPO / "config/smoke.yaml")
    config["study_a"]["sweep"][key] = value
    with pytest.raises(config_module.ConfigError, match=words.replace(".", r"\.")):
        config_module.validate(config)


@pytest.mark.parametrize("name", ["smoke", "gpu-smoke", "config", "paper"])
def test_every_config_has_a_sweep_that_checks(name):
    from abstraction_cost import config as config_module
    settings = sweep_cells.SweepSettings.from_config(config_module.load(REPO / f"config/{name}.yaml"))
    assert len(settings.batches) >= 2 and len(settings.resolutions) >= 2
