"""Faults of Study A's interleaved backend comparison (docs/faults.md row 13): a job killed mid-comparison resumes
with the invocations it has kept, and a worker that dies is its row while the others are measured."""
from pathlib import Path

import polars as pl
import pytest

from abstraction_cost import tables
from abstraction_cost.programs.workers import Worker
from abstraction_cost.study_a.comparison import (compare as comparison, job as eval_backend,
                                                 interleaved as eval_interleaved)
from abstraction_cost.study_a.sweep.store import cells_dir
from tests.study_a.comparison.test_interleaved import _job, _rows


class _Killed(BaseException):
    """Stands for the job's SIGKILL inside pytest's process."""


def test_a_killed_interleaved_job_resumes_with_the_invocations_it_has(tmp_path, smoke_config, program, monkeypatch):
    job = _job(tmp_path, smoke_config, program, implementations=["eager"])
    from abstraction_cost.study_a.sweep import conductor as sweep_conductor

    def kill():
        raise _Killed()
    monkeypatch.setattr(sweep_conductor, "kill_job", kill)
    monkeypatch.setenv("AC_FAULT", "cell:kill@0")   # the job dies once its first record is kept
    with pytest.raises(_Killed):
        eval_backend.run_job(job)
    kept = cells_dir(job.output.env)
    assert sorted(p.name for p in kept.glob("cell*.json")) == ["cell0.json"]   # invocation 0 of eager
    monkeypatch.delenv("AC_FAULT")
    launched = []
    command = Worker.__init__

    def counting(self, name, cmd):
        launched.append(name)
        command(self, name, cmd)
    monkeypatch.setattr(Worker, "__init__", counting)
    eval_backend.run_job(job)
    # invocation 0's worker again for its profiled pass alone (its timed calls were kept), then invocation 1's
    assert launched == ["eager", "eager"]
    rows = _rows(job)["eager"]
    env = tables.read("environment", job.output.env)
    assert sorted(rows["invocation"].unique()) == [0, 1] and (rows["status"] == "ok").all()
    assert env["resumes"][0] == 1 and rows["run_id"].unique().to_list() == env["run_id"].to_list()
    assert not kept.exists()


def test_a_worker_that_dies_is_its_row_and_the_others_are_measured(tmp_path, smoke_config, program, monkeypatch):
    job = _job(tmp_path, smoke_config, program)
    real = eval_interleaved.sweep_command

    def dying(*args, **kwargs):   # libtorch's worker is a process that dies of SIGSEGV as it starts
        return ["python", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
    monkeypatch.setattr(eval_interleaved, "sweep_command", dying)
    eval_backend.run_job(job)
    monkeypatch.setattr(eval_interleaved, "sweep_command", real)
    rows = _rows(job)
    assert (rows["eager"]["status"] == "ok").all() and sorted(rows["eager"]["invocation"].unique()) == [0, 1]
    dead = rows["libtorch"]
    assert dead["status"].to_list() == ["error", "error"], dead.select("status", "message")   # one per invocation
    assert dead["invocation"].to_list() == [0, 1] and "SIGSEGV" in dead["message"][0]
    assert Path(job.output.logits[1]).read_bytes() == b""
    out = comparison.compare(pl.concat(rows.values()), dict(zip(job.params.implementations, job.output.logits)),
                             1e-4, seed=0)
    by = {r["implementation"]: r for r in out}
    assert by["libtorch"]["status"] == "error" and by["libtorch"]["time_per_sample_ms"] is None
    assert by["eager"]["status"] == "ok"
