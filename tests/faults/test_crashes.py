"""Scenarios 4, 5 and 6: a C++ program crashing or exiting non-zero, a compile failure and a recompile-limit hit,
an out-of-memory error in one phase. Each is a row with its status and message; the rest of the job is kept."""
import polars as pl
import pytest

from abstraction_cost import tables

from .conftest import EAGER_ROWS, LIBTORCH_ROWS, MATMUL_ROWS, VISION_JOB


@pytest.mark.parametrize("fault, says, finished", [
    ("phase:segv@train-1", "SIGSEGV", [(0, "eval"), (0, "train")]),
    ("phase:exit@eval-1", "status 3", [(0, "eval"), (0, "train"), (1, "train")]),
])
def test_cpp_program_crash_keeps_finished_phases(work, fault, says, finished):
    crashed = work.snakemake(LIBTORCH_ROWS, AC_FAULT=fault)
    assert crashed.returncode == 0, crashed.output[-4000:]   # a failure is a row; the pipeline goes on
    rows = tables.read("training", work.path / LIBTORCH_ROWS)
    assert sorted(rows.filter(pl.col("status") == "ok").select("epoch", "phase").rows()) == finished
    failed = rows.filter(pl.col("status") != "ok")
    assert failed.height == 1 and failed["status"][0] == "error"
    assert says in failed["message"][0] and "AC_FAULT" in failed["message"][0], failed["message"][0]
    assert rows["status"].null_count() == 0
    again = work.snakemake(LIBTORCH_ROWS)
    assert again.returncode == 0 and work.jobs_run(again.output) == []


def _matmul_compiled_rows(work):
    rows = tables.read("study_b_matmul", work.path / MATMUL_ROWS)
    return rows, rows.filter(pl.col("configuration") == "cpp")


def test_compile_failure_in_one_mode_is_a_row(work):
    failed = work.snakemake(MATMUL_ROWS, AC_FAULT="compile:error@default")
    assert failed.returncode == 0, failed.output[-4000:]
    rows, compiled = _matmul_compiled_rows(work)
    assert compiled.height and (compiled["status"] == "error").all()
    assert compiled["message"].str.contains("backend compiler failed").all()
    assert rows["status"].null_count() == 0
    again = work.snakemake(MATMUL_ROWS)
    assert again.returncode == 0 and work.jobs_run(again.output) == []


def test_recompile_limit_hit_is_not_reported_ok(work):
    hit = work.snakemake(MATMUL_ROWS, AC_FAULT="compile:recompile-limit@default")
    assert hit.returncode == 0, hit.output[-4000:]
    rows, compiled = _matmul_compiled_rows(work)
    # dynamo fell back to eager: those times are eager's, and must not be reported as compiled ones
    assert compiled.height and (compiled["status"] != "ok").all(), compiled.select("n", "status", "message")
    assert compiled["message"].str.contains("recompile limit").all(), compiled["message"].to_list()


def test_out_of_memory_in_one_phase(work):
    oom = work.snakemake(EAGER_ROWS, AC_FAULT="phase:oom@train-1")
    assert oom.returncode == 0, oom.output[-4000:]
    rows = tables.read("training", work.path / EAGER_ROWS)
    failed = rows.filter(pl.col("status") == "oom")
    assert failed.height == 1, rows.select("epoch", "phase", "status", "message")
    message = failed["message"][0]
    assert "out of memory" in message and "study_a.training.batch_size" in message, message   # cause and fix
    again = work.snakemake(EAGER_ROWS)
    assert again.returncode == 0 and work.jobs_run(again.output) == []


def test_out_of_memory_in_one_vision_step(vision_work):
    """A vision job whose timing-methods step runs out of memory: that step's rows say so, the job's other steps
    are measured and kept."""
    work = vision_work
    oom = work.snakemake(f"{VISION_JOB}/environment.parquet", AC_FAULT="phase:oom@timing-warmup")
    assert oom.returncode == 0, oom.output[-4000:]
    timing = tables.read("vision_timing_methods", work.path / VISION_JOB / "vision_timing_methods.parquet")
    assert timing.height and (timing["status"] == "oom").all()
    assert timing["message"].str.contains("out of memory").all()
    assert timing["message"].str.contains("study_b.models.batch_size").all(), timing["message"][0]
    for other in ("vision_e2e", "vision_layer_times", "vision_selective"):
        rows = tables.read(other, work.path / VISION_JOB / f"{other}.parquet")
        assert rows.height and (rows["status"] == "ok").any() and rows["status"].null_count() == 0, other
    again = work.snakemake(f"{VISION_JOB}/environment.parquet")
    assert again.returncode == 0 and work.jobs_run(again.output) == []
