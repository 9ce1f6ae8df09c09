"""Interrupted long jobs resume: a vision-model job killed mid-run keeps its finished steps, and the rerun
measures only the rest, under the same run_id, its environment row saying it resumed."""
import json
import os
import signal
import time

import polars as pl

from abstraction_cost import tables
from abstraction_cost.measure.steps import StepStore
from abstraction_cost.tables.study_b_models import JOB_TABLES

from .conftest import VISION_JOB, kill_group


def test_step_store_keeps_finished_steps_across_attempts(tmp_path):
    calls = []

    def measure(value):
        def run():
            calls.append(value)
            return {"t": [{"x": value}]}
        return run

    first = StepStore(tmp_path / "steps", "key-1")
    assert first.resumes == 0 and first.step("a", measure(1)) == {"t": [{"x": 1, "run_id": first.run_id}]}
    # killed here: step b never finished; a half-written step file is as if never written
    (tmp_path / "steps" / "b.json").write_text('{"t": [{"x"')
    second = StepStore(tmp_path / "steps", "key-1")
    assert (second.run_id, second.resumes) == (first.run_id, 1)
    assert second.step("a", measure(10))["t"][0]["x"] == 1 and second.step("b", measure(2))["t"][0]["x"] == 2
    assert calls == [1, 2]
    assert StepStore(tmp_path / "steps", "key-1").resumes == 2
    # another config: its steps measured something else
    other = StepStore(tmp_path / "steps", "key-2")
    assert other.resumes == 0 and other.run_id != first.run_id and other.kept() == []
    other.clear()
    assert not (tmp_path / "steps").exists()


def _job_pid(snakemake_pid: int) -> int | None:
    for stat in os.listdir("/proc"):
        if stat.isdigit():
            try:
                fields = open(f"/proc/{stat}/stat").read().rsplit(")", 1)[1].split()
                cmd = open(f"/proc/{stat}/cmdline").read()
            except OSError:
                continue
            if int(fields[1]) == snakemake_pid and "vision_model" in cmd:
                return int(stat)
    return None


def test_vision_job_killed_mid_run_resumes_where_it_stopped(vision_work):
    work = vision_work
    target = f"{VISION_JOB}/environment.parquet"
    steps = work.path / VISION_JOB / "steps"
    proc = work.start(target)
    try:
        deadline = time.monotonic() + 900
        while not (steps / "protocol-0.json").exists():   # the layer times and the first invocation done
            assert proc.poll() is None, proc.stdout.read()[-4000:]
            assert time.monotonic() < deadline, "the vision job never finished its first invocation"
            time.sleep(0.5)
        job = _job_pid(proc.pid)
        assert job is not None
        os.kill(job, signal.SIGKILL)   # the job dies, as under a scheduler's time limit or an OOM killer
        proc.wait(timeout=120)
    finally:
        kill_group(proc)
    assert proc.returncode != 0
    kept = json.loads((steps / "lineage.json").read_text())
    assert {p.stem for p in steps.glob("*.json")} >= {"layers", "protocol-0", "lineage"}

    rerun = work.snakemake(target)
    assert rerun.returncode == 0, rerun.output[-4000:]
    log = (work.path / "logs/study_b/models/cpu-squeezenet1_1.log").read_text()
    assert "step layers:" in log and "step protocol-0:" in log and "kept from an earlier attempt" in log, log
    env = tables.read("environment", work.path / target)
    assert env["run_id"].to_list() == [kept["run_id"]] and env["resumes"].to_list() == [1]
    for name in JOB_TABLES:
        part = pl.read_parquet(work.path / VISION_JOB / f"{name}.parquet")
        assert set(part["run_id"]) <= {kept["run_id"]}, name   # one lineage: every row joins that env row
        assert part["status"].null_count() == 0 if "status" in part.columns else True
    assert not steps.exists()   # done: a forced rerun measures afresh
