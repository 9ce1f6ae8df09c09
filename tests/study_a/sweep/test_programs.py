"""The sweep's C++ programs on the CPU: a framework-free fake backend of native/common/sweep.h and ac_libtorch
sweep under injected faults (a crashed program restarts from the next cell, ooms skip across restarts), and the
sweep job writing every cell."""
from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest
import torch

from abstraction_cost.programs import native
from abstraction_cost.study_a import transfer
from abstraction_cost.study_a.sweep import cells as sweep_cells, native_walk, serial as sweep
from abstraction_cost.study_a.sweep.cells import walk
from tests.fixtures.repository import REPO
from tests.fixtures.sweep_jobs import sweep_job

from tests.fixtures.sweep_fakes import SKIPPED_B2, _fake_command, fake_program, pool_dir, _run  # noqa: F401 (fixtures)


def test_cpp_crash_loses_no_cell_and_restarts_from_the_next(fake_program, monkeypatch):
    monkeypatch.setenv("AC_FAULT", "cell:crash@1,cell:crash@4")
    cells = walk([1, 2, 4], [8, 16], ["float32-pinned"])
    rows = native_walk.native_cells(cells, _fake_command(fake_program, cells), _run(), "fake")
    assert [(r["cell"], r["status"], r["attempt"]) for r in rows] == [
        (0, "ok", 0), (1, "error", 0), (2, "ok", 1), (3, "ok", 1), (4, "error", 1), (5, "ok", 2)]
    assert rows[1]["exit_status"] == -11 and "SIGSEGV" in rows[1]["message"]
    assert rows[5]["h2d_bytes"] == 4 * 3 * 16 * 16 * 4 and rows[5]["repeats"] == 3


def test_cpp_oom_skips_larger_batches_even_across_a_restart(fake_program, monkeypatch):
    # batch 2 at 16 px is oom (2·16² > 300); the crash in cell 4 restarts the program, which must still skip 4
    monkeypatch.setenv("AC_FAULT", "cell:crash@4")
    cells = walk([1, 2, 4, 8], [8, 16], ["float32-pinned"])
    rows = native_walk.native_cells(cells, _fake_command(fake_program, cells, oom_above=300), _run(), "fake")
    by_cell = {r["cell"]: (r["status"], r["message"]) for r in rows}
    assert [by_cell[i][0] for i in range(4)] == ["ok", "ok", "ok", "oom"]  # 8·8² = 512 > 300
    assert by_cell[4][0] == "error" and by_cell[5] == ("oom", "fake: cannot allocate 1536 elements")
    assert by_cell[6] == ("oom", SKIPPED_B2) and by_cell[7] == ("oom", SKIPPED_B2)


def test_cpp_walks_every_transfer_mode_of_a_shape_in_one_process(fake_program, monkeypatch):
    """Both modes of each shape back to back; a crash in one mode's cell restarts the program, which still skips
    the larger batches of the mode that was oom (--oom-at R:B:T) and only those."""
    monkeypatch.setenv("AC_FAULT", "cell:oom@2,cell:crash@3")
    cells = walk([1, 2, 4], [8], ["uint8-pinned", "float32-pageable"])
    launches = []
    command_for = _fake_command(fake_program, cells)
    rows = native_walk.native_cells(cells, lambda start, oom_at: launches.append(oom_at) or command_for(start, oom_at),
                                    _run(), "fake")
    assert [(r["batch_size"], r["transfer"], r["status"]) for r in rows] == [
        (1, "uint8-pinned", "ok"), (1, "float32-pageable", "ok"), (2, "uint8-pinned", "oom"),
        (2, "float32-pageable", "error"), (4, "uint8-pinned", "oom"), (4, "float32-pageable", "ok")]
    assert launches == ["", "8:2:uint8-pinned"] and rows[4]["message"] == SKIPPED_B2
    assert rows[5]["h2d_bytes"] == 4 * 3 * 8 * 8 * 4 and rows[0]["h2d_bytes"] == 3 * 8 * 8
    assert all(r["h2d_ms"] <= r["time_ms"] for r in rows if r["status"] == "ok")


def test_cpp_warm_up_runs_on_a_shapes_first_mode_and_after_an_oom(fake_program):
    """native/common/sweep.h: a shape's later modes are warm (the fake backend is cold only after release()); an
    oom shape's later modes are skipped without being tried, and the next shape starts cold."""
    cells = walk([1, 2, 4], [8], list(sweep_cells.TRANSFERS))
    rows = native_walk.native_cells(cells, _fake_command(fake_program, cells, oom_above=150), _run(), "fake")
    assert [(r["status"], r.get("warmup_calls")) for r in rows] == [
        ("ok", 1), ("ok", 0), ("ok", 0), ("ok", 1), ("ok", 0), ("ok", 0), ("oom", None), ("oom", None), ("oom", None)]
    assert rows[7]["message"] == rows[8]["message"] == (
        "skipped: batch 4 already out of memory at this resolution in float32-pageable")


@pytest.mark.parametrize("budget,repeats", [("0", 10), ("1e-9", 3), ("60", 10)])
def test_cpp_cell_budget_ends_a_cells_timed_calls(fake_program, budget, repeats):
    """--cell-budget-s (native/common/sweep.h): the same rule as the Python processes' (sweep_cells.more_repeats)."""
    records = []
    native.launch([str(fake_program), "--batches", "1", "--resolutions", "8", "--warmup", "0", "--repeats", "10",
                   "--transfers", "uint8-pinned", "--oom-above", "1000", "--cell-budget-s", budget],
                  on_record=records.append)
    cells = [r for r in records if r["kind"] == "cell"]
    assert len(cells) == 1 and len(cells[0]["times_ms"]) == repeats


def test_cpp_program_that_never_starts_fails_every_cell_once(tmp_path):
    cells = walk([1, 2], [8], ["float32-pageable"])
    rows = native_walk.native_cells(cells, lambda start, oom_at: [str(tmp_path / "missing")], _run(), "missing")
    assert [(r["status"], r["exit_status"]) for r in rows] == [("error", 127), ("error", 127)]
    assert "cannot start" in rows[0]["message"]


def test_fake_program_refuses_bad_flags(fake_program):
    def refused(*flags):
        out = subprocess.run([str(fake_program), "--warmup", "0", "--repeats", "1", "--oom-above", "1", *flags],
                             capture_output=True, text=True)
        assert out.returncode == 2
        return out.stdout
    assert "--batches: '0' is not a positive integer" in refused("--batches", "8,0", "--resolutions", "8",
                                                                 "--transfers", "uint8-pinned")
    assert "--transfers: 'float16'" in refused("--batches", "8", "--resolutions", "8",
                                               "--transfers", "uint8-pinned,float16")
    assert "--transfers: 'uint8-pinned' is given twice" in refused("--batches", "8", "--resolutions", "8",
                                                                   "--transfers", "uint8-pinned,uint8-pinned")
    assert "--oom-at: '8:2' is not RESOLUTION:BATCH:TRANSFER" in refused(
        "--batches", "8", "--resolutions", "8", "--transfers", "uint8-pinned", "--oom-at", "8:2")
    assert "--cell-budget-s must be >= 0 seconds" in refused(
        "--batches", "8", "--resolutions", "8", "--transfers", "uint8-pinned", "--cell-budget-s", "-1")


def test_libtorch_sweep_on_the_cpu_with_a_crash(pool_dir, tmp_path, monkeypatch):
    """ac_libtorch sweep (torch::nn ResNet-50) on the CPU: a crash in cell 1, restart, every cell has its row."""
    from abstraction_cost.models import resnet, weights_file
    program = native.ensure_built("libtorch")
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 5).state_dict(), weights)
    settings = SimpleNamespace(batches=(1, 2), resolutions=(8, 16), transfers=("uint8-pinned",), warmup=0, repeats=2,
                               cell_budget_s=None)
    inputs = SimpleNamespace(inputs=str(pool_dir), weights=str(weights), program=str(program))
    manifest = transfer.read_manifest(pool_dir)
    config = {"backend_flags": {"tf32": False, "cudnn_benchmark": False}}
    cells = walk(settings.batches, settings.resolutions, settings.transfers)

    def command_for(start, oom_at):
        return native_walk.sweep_command(program, "libtorch", inputs, manifest, settings, config,
                                         torch.device("cpu"), 5, start, oom_at)
    monkeypatch.setenv("AC_FAULT", "cell:crash@1")
    rows = native_walk.native_cells(cells, command_for, _run(), "libtorch")
    assert [(r["cell"], r["status"], r["attempt"]) for r in rows] == [(0, "ok", 0), (1, "error", 0),
                                                                      (2, "ok", 1), (3, "ok", 1)]
    assert rows[3]["h2d_bytes"] == 2 * 3 * 16 * 16 and rows[3]["time_ms"] > 0


@pytest.mark.parametrize("implementation", ["eager", "libtorch"])
def test_sweep_job_writes_every_cell_under_injected_faults(pool_dir, tmp_path, monkeypatch, implementation):
    """Rule sweep's job (measured run, table) on the smoke config (its two transfer modes), an oom at cell 1
    (batch 1, 8 px, uint8-pinned: batch 2 there is skipped, its float32 cell is not), a crash at cell 2 (batch 2,
    8 px, float32-pageable) and a wrong output at cell 5 (batch 1, 16 px, uint8-pinned: ac_libtorch's saved logits
    perturbed, which the job's check against eager's logits catches; every other cell's logits pass it)."""
    from abstraction_cost import config as config_module, tables
    from abstraction_cost.models import resnet, weights_file
    config = config_module.load(REPO / "config/smoke.yaml")
    config["study_a"]["sweep"].update(batches=[1, 2], resolutions=[8, 16], repeats=2, warmup=0)
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    inputs = SimpleNamespace(inputs=str(pool_dir), weights=str(weights))
    if implementation == "libtorch":
        inputs.program = str(native.ensure_built("libtorch"))
    job = sweep_job(config, inputs, implementation, tmp_path)
    monkeypatch.setenv("AC_FAULT", "cell:oom@1,cell:crash@2,cell:wrong@5")
    sweep.run(job)
    df = tables.read("sweep", job.output.tables[0])
    assert df["cell"].to_list() == list(range(8))
    assert df["transfer"].to_list() == ["float32-pageable", "uint8-pinned"] * 4
    assert df["status"].to_list() == ["ok", "oom", "error", "oom", "ok", "wrong_output", "ok", "ok"]
    assert df["time_ms"][5] is None and df["time_per_sample_ms"][5] is None
    expected = {"libtorch": "libtorch at input (1, 3, 16, 16): logits differ from eager's: max |Δ|",
                "eager": "injected wrong output (AC_FAULT)"}[implementation]
    assert df["message"][5].startswith(expected)
    assert df["message"][3] == "skipped: batch 1 already out of memory at this resolution"
    assert df["run_id"].n_unique() == 1 and tables.read("environment", job.output.envs[0]).height == 1
    assert df["time_per_sample_ms"][7] > 0 and df["implementation"].unique().to_list() == [implementation]
    assert df["numerics"].unique().to_list() == ["fp32"]
