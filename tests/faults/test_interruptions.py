"""Scenarios 1, 2 and 10: Snakemake killed mid-job, a job killed while writing its table, two runs at once."""
import os
import signal
import time

import polars as pl

from abstraction_cost import tables

from .conftest import EAGER_ROWS, faults_config, kill_group

TRAIN_LOG = "logs/study_a/train-eager-synthetic-cifar10-kaiming-normal-fan-out-0.log"


def test_snakemake_killed_mid_job_then_plain_rerun(work):
    config = faults_config()
    config["study_a"]["training"]["epochs"] = 8   # a job long enough to be killed in the middle
    work.write_config(config)
    proc = work.start(EAGER_ROWS)
    try:
        work.wait_for_log(TRAIN_LOG, "", proc)   # the job has started
        time.sleep(3)
        os.kill(proc.pid, signal.SIGKILL)   # Snakemake itself, not its job
        proc.wait()
        time.sleep(6)
        # the orphaned job stopped on its own: nothing it was writing appears later, looking done
        assert not (work.path / EAGER_ROWS).exists()
        assert "Snakemake" in (work.path / TRAIN_LOG).read_text() and "gone" in (work.path / TRAIN_LOG).read_text()
    finally:
        kill_group(proc)
    rerun = work.snakemake(EAGER_ROWS)
    assert rerun.returncode == 0, rerun.output[-4000:]
    assert "stale lock" in rerun.output     # said, not silently removed
    assert work.jobs_run(rerun.output) == ["train_eager"]   # data preparation is not redone
    rows = tables.read("training", work.path / EAGER_ROWS)
    assert rows.height == 16 and (rows["status"] == "ok").all()
    assert not work.leftovers()


def test_job_killed_while_writing_its_table(work):
    crashed = work.snakemake(EAGER_ROWS, AC_FAULT="table:kill@training")
    assert crashed.returncode != 0
    assert "SIGKILL" in crashed.output and "train_eager" in crashed.output
    assert not (work.path / EAGER_ROWS).exists()
    rerun = work.snakemake(EAGER_ROWS)
    assert rerun.returncode == 0, rerun.output[-4000:]
    assert work.jobs_run(rerun.output) == ["train_eager"]
    assert (tables.read("training", work.path / EAGER_ROWS)["status"] == "ok").all()
    assert not work.leftovers(), work.leftovers()


def test_two_runs_at_once_in_one_directory(work):
    first, second = work.start(EAGER_ROWS), work.start(EAGER_ROWS)
    try:
        outputs = [p.communicate(timeout=600)[0] for p in (first, second)]
    finally:
        kill_group(first)
        kill_group(second)
    codes = [first.returncode, second.returncode]
    assert sorted(codes)[0] == 0 and sorted(codes)[1] != 0, (codes, [o[-2000:] for o in outputs])
    refused = outputs[codes.index(max(codes))]
    assert "another Snakemake" in refused and "is running in this directory" in refused, refused[-3000:]
    assert "--unlock" not in refused   # removing a live run's lock is the wrong advice
    after = work.snakemake(EAGER_ROWS)
    assert after.returncode == 0 and work.jobs_run(after.output) == [], after.output[-3000:]
    assert (pl.read_parquet(work.path / EAGER_ROWS)["status"] == "ok").all()
