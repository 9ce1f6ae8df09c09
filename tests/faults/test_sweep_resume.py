"""Interrupted sweep jobs resume: each measured cell is kept as it completes (study_a/sweep/store.py); a job
killed mid-walk (AC_FAULT=cell:kill@K: SIGKILL to the job and its program) keeps its cells, and the rerun
measures only the rest, in Python and through a C++ program (--start-cell, --oom-at), under the same run_id.
Under Snakemake: every sweep job killed, or Snakemake itself killed mid-job, then a plain rerun."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from abstraction_cost import tables
from abstraction_cost.programs import native
from abstraction_cost.study_a.sweep import cells as sweep_cells, native_walk, python_walk, store as sweep_store
from abstraction_cost.study_a.sweep.cells import walk
from abstraction_cost.study_a.sweep.store import CellStore, cells_dir, job_key
from abstraction_cost.study_a.transfer import Pool

from tests.fixtures.repository import REPO
from tests.fixtures.sweep_fakes import SKIPPED_B2, _fake_command, fake_program, pool_dir, _run, TinyModel  # noqa: F401
from .conftest import faults_config, kill_group


def _ok(index: int, batch: int, resolution: int, **extra) -> dict:
    return {"cell": index, "batch_size": batch, "resolution": resolution, "status": "ok", "message": None,
            "time_ms": 1.5, "attempt": 0, **extra}


# ------------------------------------------------------------------------------------------- the store
def test_cell_store_keeps_rows_under_its_key_only(tmp_path):
    assert cells_dir(tmp_path / "eager.rows.parquet") == tmp_path / "eager.cells"
    first = CellStore(tmp_path / "cells", "key-1")
    kept = first.keep(_ok(0, 1, 8))
    assert kept["run_id"] == first.run_id and first.keep(_ok(1, 2, 8, run_id="older"))["run_id"] == "older"
    (tmp_path / "cells" / "cell2.json").write_text('{"cell": 2, "sta')   # killed while writing cell 2
    again = CellStore(tmp_path / "cells", "key-1")
    assert (again.run_id, again.resumes) == (first.run_id, 1)
    assert again.rows() == {0: kept, 1: {**_ok(1, 2, 8), "run_id": "older"}}
    other = CellStore(tmp_path / "cells", "key-2")   # another grid or config: measured something else
    assert other.resumes == 0 and other.run_id != first.run_id and other.rows() == {}


def test_job_key_changes_with_what_the_cells_measure(tmp_path):
    from abstraction_cost import config as config_module
    config = config_module.load(REPO / "config/smoke.yaml")
    weights = tmp_path / "w.weights"
    weights.write_bytes(b"1")
    wildcards = {"implementation": "eager", "numerics": "fp32"}
    key = job_key(config, wildcards, {"weights": str(weights)})
    assert job_key(config, wildcards, {"weights": str(weights)}) == key
    assert job_key(config, {**wildcards, "implementation": "libtorch"}, {"weights": str(weights)}) != key
    assert job_key(config, {**wildcards, "numerics": "tf32"}, {"weights": str(weights)}) != key
    config["study_a"]["sweep"]["transfers"].reverse()   # cell K is another (shape, mode)
    assert job_key(config, wildcards, {"weights": str(weights)}) != key
    config["study_a"]["sweep"]["transfers"].reverse()
    config["study_a"]["sweep"]["kernels"]["top"] += 1   # not the job's cells: the store stays usable
    assert job_key(config, wildcards, {"weights": str(weights)}) == key
    config["study_a"]["sweep"]["repeats"] += 1
    assert job_key(config, wildcards, {"weights": str(weights)}) != key
    config["study_a"]["sweep"]["repeats"] -= 1
    weights.write_bytes(b"22")   # new weights (or a rebuilt program): the kept cells measured the old ones
    assert job_key(config, wildcards, {"weights": str(weights)}) != key


def test_kill_is_the_launchers_fault_not_a_cells():
    environ = {"AC_FAULT": "cell:oom@1,cell:kill@1,cell:crash@3"}
    assert sweep_cells.faults(environ) == {1: "oom", 3: "crash"} and sweep_cells.kills(environ) == {1}
    with pytest.raises(ValueError, match="'cell:kill@x' is not site:what@where"):
        sweep_cells.kills({"AC_FAULT": "cell:kill@x"})


# ------------------------------------------------------------------------------------ walks with a store
def test_python_walk_takes_kept_cells_back_and_keeps_the_skip_rule(pool_dir, tmp_path):
    store = CellStore(tmp_path / "cells", "k")
    kept = [store.keep(_ok(0, 1, 8)), store.keep({**_ok(1, 2, 8), "status": "oom", "time_ms": None,
                                                  "message": "out of memory"})]
    store = CellStore(tmp_path / "cells", "k")   # the rerun
    rows = python_walk.python_cells(TinyModel(), walk([1, 2, 4], [8, 16], ["uint8-pinned"]), Pool(pool_dir), 0, 2,
                                    _run(), store)
    assert rows[:2] == kept
    assert [(r["cell"], r["status"], r["attempt"]) for r in rows[2:]] == [
        (2, "oom", 1), (3, "ok", 1), (4, "ok", 1), (5, "ok", 1)]
    assert rows[2]["message"] == SKIPPED_B2   # batch 2's kept oom still skips batch 4
    assert sorted(store.rows()) == list(range(6)) and {r["run_id"] for r in rows} == {store.run_id}


def test_cpp_walk_starts_after_the_kept_cells_with_their_ooms(fake_program, tmp_path, monkeypatch):
    cells = walk([1, 2, 4], [8, 16], ["float32-pinned"])
    store = CellStore(tmp_path / "cells", "k")
    store.keep(_ok(0, 1, 8))
    store.keep({**_ok(1, 2, 8), "status": "oom", "message": "fake: cannot allocate"})
    store.keep({**_ok(2, 4, 8), "status": "oom", "message": SKIPPED_B2, "attempt": 1})
    store = CellStore(tmp_path / "cells", "k")
    launched = []
    command_for = _fake_command(fake_program, cells)

    def recording(start, oom_at):
        launched.append((start, oom_at))
        return command_for(start, oom_at)
    monkeypatch.setenv("AC_FAULT", "cell:crash@4,cell:kill@99")   # the program accepts the launcher's kill@K
    rows = native_walk.native_cells(cells, recording, _run(), "fake", store)
    # the kept oom goes on to the program, across its restart too
    assert launched == [(3, "8:2:float32-pinned"), (5, "8:2:float32-pinned")]
    assert [(r["cell"], r["status"], r["attempt"]) for r in rows] == [
        (0, "ok", 0), (1, "oom", 0), (2, "oom", 1), (3, "ok", 2), (4, "error", 2), (5, "ok", 3)]
    assert rows[0]["time_ms"] == 1.5 and rows[3]["time_ms"] != 1.5
    assert sorted(store.rows()) == list(range(6))   # the crash row too: it is the cell's result


def test_a_cell_killed_from_outside_is_not_kept(tmp_path):
    """A program killed by SIGKILL/SIGTERM/SIGINT may be the job's own interruption: the row is in a finished
    job's table, but a rerun measures the cell again."""
    store = CellStore(tmp_path / "cells", "k")
    for index, status in enumerate((-signal.SIGKILL, -signal.SIGINT, -signal.SIGSEGV, 3)):
        sweep_store._keep(store, {"cell": index, "status": "error", "exit_status": status}, set())
    assert sorted(store.rows()) == [2, 3]


# --------------------------------------------------------------------------------- a killed sweep job
JOB = """
import json, logging, sys
from types import SimpleNamespace as NS
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from abstraction_cost.study_a.sweep import serial as sweep
a = json.loads(sys.argv[1])
sweep.run(NS(config=a["config"], input=NS(**a["input"]), output=NS(**a["output"]), params=NS(**a["params"]),
             rule="sweep", wildcards=NS(**a["wildcards"])))
"""


def _job(tmp_path: Path, pool: Path, implementation: str, numerics=("fp32",)) -> list[str]:
    from abstraction_cost import config as config_module
    from abstraction_cost.models import resnet, weights_file
    config = config_module.load(REPO / "config/smoke.yaml")
    config["study_a"]["sweep"].update(batches=[1, 2, 4], resolutions=[8, 16], transfers=["uint8-pinned"], repeats=2,
                                      warmup=0)
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    inputs = {"inputs": str(pool), "weights": str(weights)}
    if implementation == "libtorch":
        inputs["program"] = str(native.ensure_built("libtorch"))
    jobs = tmp_path / "jobs"
    args = {"config": config, "input": inputs, "wildcards": {"implementation": implementation},
            "params": {"numerics": list(numerics)},
            "output": {"tables": [str(jobs / n / f"{implementation}.rows.parquet") for n in numerics],
                       "envs": [str(jobs / n / f"{implementation}.env.parquet") for n in numerics]}}
    for n in numerics:
        (jobs / n).mkdir(parents=True)
    return [sys.executable, "-c", JOB, json.dumps(args)]


def _running_with(text: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text in cmdline.read_bytes().decode(errors="replace"):
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def _start(command: list[str], **faults: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AC_")}
    env["PYTHONPATH"] = str(REPO / "src")
    return subprocess.run(command, capture_output=True, text=True, env={**env, **faults}, timeout=600,
                          start_new_session=True)   # its own group: a kill@K takes nothing else with it


@pytest.mark.parametrize("implementation", ["eager", "libtorch"])
def test_sweep_job_killed_mid_walk_resumes_where_it_stopped(pool_dir, tmp_path, implementation):
    command = _job(tmp_path, pool_dir, implementation)
    table = tmp_path / "jobs" / "fp32" / f"{implementation}.rows.parquet"
    env_path = table.with_name(f"{implementation}.env.parquet")
    cells = cells_dir(table)

    # cell 0 ok, cell 1 oom, then the job and its program die by SIGKILL, as under a time limit or a lost node
    killed = _start(command, AC_FAULT="cell:oom@1,cell:kill@1")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert not table.exists() and not env_path.exists()
    lineage = json.loads((cells / "lineage.json").read_text())
    kept = {int(p.stem[4:]): json.loads(p.read_text()) for p in cells.glob("cell*.json")}
    assert sorted(kept) == [0, 1] and kept[0]["status"] == "ok" and kept[1]["status"] == "oom"
    assert _running_with(str(tmp_path)) == []   # the program died with the job: nothing left running

    rerun = _start(command)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "2 of 6 cells kept from an interrupted attempt" in rerun.stderr
    if implementation == "libtorch":   # the program starts after the kept cells, told their oom
        assert "--start-cell 2 --oom-at 8:2:uint8-pinned" in rerun.stderr
    df = tables.read("sweep", table)
    assert df["cell"].to_list() == list(range(6))   # every cell once
    assert df["status"].to_list() == ["ok", "oom", "oom", "ok", "ok", "ok"]
    assert df["message"][2] == SKIPPED_B2   # the skip rule held across the resume
    assert df["attempt"].to_list() == [0, 0, 1, 1, 1, 1]   # kept cells were not measured again
    for column in ("time_ms", "time_ms_low", "time_ms_high", "h2d_ms", "prepare_s"):
        assert df[column][0] == kept[0][column], column
    assert df["time_ms"][3:].is_not_null().all()
    assert set(df["run_id"]) == {lineage["run_id"]}   # one lineage: every row joins the job's env row
    env = tables.read("environment", env_path)
    assert env["run_id"].to_list() == [lineage["run_id"]] and env["resumes"].to_list() == [1]
    assert not cells.exists()   # done: a forced rerun measures afresh


def test_a_job_killed_in_its_second_numerics_takes_the_first_back(pool_dir, tmp_path):
    """One process walks fp32 then tf32. Killed after fp32's cell 1, then again after tf32's cell 1 (its fp32
    table written, as Snakemake would then delete it): the last run measures no fp32 cell again and only tf32's
    cells 2 to 5."""
    command = _job(tmp_path, pool_dir, "eager", ("fp32", "tf32"))
    tables_ = {n: tmp_path / "jobs" / n / "eager.rows.parquet" for n in ("fp32", "tf32")}
    for run in range(2):
        killed = _start(command, AC_FAULT="cell:kill@1")
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert tables_["fp32"].exists() and not tables_["tf32"].exists()
    assert len(list(cells_dir(tables_["fp32"]).glob("cell*.json"))) == 6   # kept until the whole job is done
    tables_["fp32"].unlink()
    done = _start(command)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "6 of 6 cells kept from an interrupted attempt" in done.stderr
    fp32, tf32 = (tables.read("sweep", tables_[n]) for n in ("fp32", "tf32"))
    assert fp32["attempt"].to_list() == [0, 0, 1, 1, 1, 1] and fp32["numerics"].unique().to_list() == ["fp32"]
    assert tf32["attempt"].to_list() == [0, 0, 1, 1, 1, 1] and tf32["numerics"].unique().to_list() == ["tf32"]
    assert fp32["status"].to_list() == tf32["status"].to_list() == ["ok"] * 6
    assert not any(cells_dir(t).exists() for t in tables_.values())


def test_killed_sweep_jobs_resume_under_a_plain_snakemake_rerun(work):
    """The serial protocol's jobs (one per implementation) each die (SIGKILL) after their cell 1; Snakemake removes
    the failed jobs' outputs but not their kept cells, and the next plain run measures only cells 2 to 7 of each
    (2 × 2 shapes × two transfer modes)."""
    config = faults_config()
    config["study_a"]["sweep"]["protocol"] = {"mode": "serial"}
    work.write_config(config)
    target = "results/study_a/sweep.parquet"
    killed = work.snakemake(target, AC_FAULT="cell:kill@1")
    assert killed.returncode != 0
    jobs = work.path / "results/study_a/sweep/jobs"
    stores = sorted(jobs.rglob("*.cells"))
    assert len(stores) == 2 and not list(jobs.rglob("*.rows.parquet"))   # eager, libtorch
    lineages = {json.loads((s / "lineage.json").read_text())["run_id"] for s in stores}
    assert all(sorted(p.name for p in s.glob("cell*.json")) == ["cell0.json", "cell1.json"] for s in stores)

    rerun = work.snakemake(target)
    assert rerun.returncode == 0, rerun.output[-4000:]
    assert sorted(work.jobs_run(rerun.output)) == ["concat_sweep", *["sweep"] * 2]   # nothing upstream again
    df = tables.read("sweep", work.path / target).sort("implementation", "cell")
    for (implementation,), part in df.group_by("implementation"):
        assert part["cell"].to_list() == list(range(8)), implementation
        assert part["attempt"].to_list() == [0, 0] + [1] * 6, implementation
        assert part["run_id"].n_unique() == 1 and part["status"].null_count() == 0
    assert set(df["run_id"]) == lineages
    env = tables.read("environment", work.path / "results/study_a/sweep.env.parquet")
    assert set(env["run_id"]) == lineages and env["resumes"].to_list() == [1] * 2
    assert not list(jobs.rglob("*.cells")) and not work.leftovers()


def test_a_killed_interleaved_sweep_resumes_with_the_records_it_kept(work):
    """The interleaved job (one per numerics, every implementation) dies (SIGKILL) once cell 1's first record is
    kept; its two invocations walk the cells together (no implementation compiles), so cell 0's records of both are
    kept before it. The plain rerun keeps the records measured before, under the same run_id, and measures the rest:
    every implementation's every cell, over both invocations."""
    target = "results/study_a/sweep.parquet"
    killed = work.snakemake(target, AC_FAULT="cell:kill@1")
    assert killed.returncode != 0
    jobs = work.path / "results/study_a/sweep/jobs"
    (store,) = jobs.rglob("*.cells")
    kept = {p.name: json.loads(p.read_text())["record"] for p in store.glob("cell*.json")}
    assert {(r["cell"], r["status"]) for r in kept.values()} == {(0, "ok"), (1, "ok")} and len(kept) == 2 * 2 + 1
    lineage = json.loads((store / "lineage.json").read_text())["run_id"]

    rerun = work.snakemake(target)
    assert rerun.returncode == 0, rerun.output[-4000:]
    assert sorted(work.jobs_run(rerun.output)) == ["concat_sweep", "sweep"]   # nothing upstream again
    df = tables.read("sweep", work.path / target).sort("implementation", "cell")
    assert sorted(df["implementation"].unique()) == ["eager", "libtorch"]
    assert (df["status"] == "ok").all() and (df["invocations"] == 2).all() and set(df["run_id"]) == {lineage}
    env = tables.read("environment", work.path / "results/study_a/sweep.env.parquet")
    assert env["resumes"].to_list() == [1]
    assert not list(jobs.rglob("*.cells")) and not work.leftovers()


def test_snakemake_killed_mid_sweep_then_plain_rerun(work):
    """Snakemake itself SIGKILLed while a C++ sweep job walks: the job stops its program and itself (run_guard);
    the cells measured before are kept, the cell the program was killed in is not (the kill was no result of
    it), and the plain rerun measures only the rest."""
    config = faults_config()
    config["study_a"]["sweep"].update(implementations=["libtorch"], transfers=["uint8-pinned"], batches=[1, 2, 4],
                                      resolutions=[32, 64], repeats=20,   # cells long enough to be killed in
                                      protocol={"mode": "serial"})
    work.write_config(config)
    target = "results/study_a/sweep.parquet"
    jobs = work.path / "results/study_a/sweep/jobs"
    proc = work.start(target)
    try:
        deadline = time.monotonic() + 600
        while not list(jobs.rglob("cell1.json")):
            assert proc.poll() is None, proc.stdout.read()[-4000:]
            assert time.monotonic() < deadline, "the sweep job never kept its cell 1"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)   # Snakemake, not its job
        proc.wait()
        time.sleep(3)   # the job sees its Snakemake gone within 0.5 s
        assert _running_with(str(work.path)) == []   # neither the job nor its program goes on
    finally:
        kill_group(proc)
    (store,) = jobs.rglob("*.cells")
    kept = {int(p.stem[4:]): json.loads(p.read_text()) for p in store.glob("cell*.json")}
    assert {0, 1} <= set(kept) and len(kept) < 6, sorted(kept)
    assert all(row["status"] == "ok" for row in kept.values())   # no row of the killed program's last cell

    rerun = work.snakemake(target)
    assert rerun.returncode == 0, rerun.output[-4000:]
    assert "sweep" in work.jobs_run(rerun.output) and "sweep_inputs" not in work.jobs_run(rerun.output)
    df = tables.read("sweep", work.path / target)
    assert df["cell"].to_list() == list(range(6)) and (df["status"] == "ok").all()
    for index, row in kept.items():   # kept, not measured again
        assert (df["attempt"][index], df["time_ms"][index]) == (0, row["time_ms"])
    assert (df["attempt"][len(kept):] >= 1).all()
    env = tables.read("environment", work.path / "results/study_a/sweep.env.parquet")
    assert env["resumes"].to_list() == [1] and set(df["run_id"]) == set(env["run_id"])
    assert not list(jobs.rglob("*.cells")) and not work.leftovers()
