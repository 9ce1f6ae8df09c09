"""A training job writes rows whatever happens: not_run, missing, error, ok."""
from types import SimpleNamespace

import torch

from abstraction_cost import tables
from abstraction_cost.data import prepared
from abstraction_cost.study_a.training import job as training_job


def _snakemake(tmp_path, config, data_dir):
    wildcards = SimpleNamespace(dataset="digits", init="zero-gamma", seed="0",
                                items=lambda: {"dataset": "digits", "init": "zero-gamma", "seed": "0"}.items())
    return SimpleNamespace(
        config=config, wildcards=wildcards, rule="train_test",
        input=SimpleNamespace(data=str(data_dir), order=str(tmp_path / "o.i32"), weights=str(tmp_path / "w")),
        output=SimpleNamespace(table=str(tmp_path / "rows.parquet"), env=str(tmp_path / "env.parquet")))


def _run(tmp_path, config, trainer, data_dir=None):
    if data_dir is None:
        data_dir = tmp_path / "missing"
        prepared.write_missing(data_dir, "digits", "no network: mnist.gz, expected md5 0123")
    training_job.run(_snakemake(tmp_path, config, data_dir), "eager", trainer)
    rows = tables.read("training", tmp_path / "rows.parquet")
    env = tables.read("environment", tmp_path / "env.parquet")
    assert rows["run_id"].unique().to_list() == env["run_id"].to_list()
    return rows


def _never(*args):
    raise AssertionError("the trainer must not run")


def _without_gpu(smoke_config, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)   # a machine without a GPU, even on one
    smoke_config["study_a"]["training"]["require_gpu"] = True
    smoke_config["device"] = "auto"


def test_required_gpu_missing_is_not_run(tmp_path, smoke_config, monkeypatch):
    from abstraction_cost.data import offline

    _without_gpu(smoke_config, monkeypatch)
    prepared.write(tmp_path / "digits", "digits", offline.digits(8), [str(d) for d in range(10)], [])
    rows = _run(tmp_path, smoke_config, _never, tmp_path / "digits")
    assert rows.select("status", "backend", "dataset", "seed").row(0) == ("not_run", "eager", "digits", 0)
    assert rows["message"][0] == "no CUDA GPU on this machine and study_a.training.require_gpu is true"


def test_no_gpu_and_no_dataset_is_missing_and_says_both(tmp_path, smoke_config, monkeypatch):
    _without_gpu(smoke_config, monkeypatch)
    rows = _run(tmp_path, smoke_config, _never)
    assert rows["status"].to_list() == ["missing"]
    message = rows["message"][0]
    assert message.startswith("digits: no network: mnist.gz, expected md5 0123; and not_run"), message
    assert message.endswith("no CUDA GPU on this machine and study_a.training.require_gpu is true"), message


def test_missing_dataset_rows_carry_the_reason(tmp_path, smoke_config):
    rows = _run(tmp_path, smoke_config, _never)
    assert rows["status"].to_list() == ["missing"]
    assert rows["message"][0] == "digits: no network: mnist.gz, expected md5 0123"


def test_a_failing_backend_becomes_an_error_row(tmp_path, smoke_config):
    from abstraction_cost.data import offline

    data_dir = tmp_path / "digits"
    prepared.write(data_dir, "digits", offline.digits(8), [str(d) for d in range(10)], [])
    (tmp_path / "o.i32").write_bytes(b"")

    rows = _run(tmp_path, smoke_config, _never, data_dir)
    assert rows["status"].to_list() == ["error"]
    assert rows["message"][0].startswith("ValueError:") and "o.i32" in rows["message"][0]


def test_an_ok_job_logs_where_its_time_beside_the_epochs_went(tmp_path, smoke_config, caplog):
    """The eager job held its GPU slot 9 s for 2 s of epochs on two H200s: the log line says which step took it."""
    import logging

    from abstraction_cost.data import offline
    from abstraction_cost.data import order as orders

    data_dir = tmp_path / "digits"
    prepared.write(data_dir, "digits", offline.digits(8), [str(d) for d in range(10)], [])
    count = len(prepared.load(data_dir).train.labels)
    orders.write(tmp_path / "o.i32", count, 0, smoke_config["study_a"]["training"]["epochs"])

    def trainer(run, data, order, weights, settings):
        return [{"epoch": 0, "phase": p, "status": "ok", "message": None, "wall_s": 1.5} for p in ("train", "eval")]

    with caplog.at_level(logging.INFO, logger=training_job.log.name):
        rows = _run(tmp_path, smoke_config, trainer, data_dir)
    assert rows["status"].to_list() == ["ok", "ok"], rows["message"].to_list()
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("eager job:"))
    steps = [part.rsplit(" ", 2)[0] for part in line.removeprefix("eager job: ").split("; ")[0].split(", ")]
    assert steps == ["device and environment", "data", "trainer", "environment row and table"], line
    assert line.endswith("the trainer's epochs 3.0 s"), line
