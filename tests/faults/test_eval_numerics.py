"""Study A's backend comparison is one job per numerics in which every implementation is a worker taking turns
with the others over invocations (study_a/comparison/interleaved.py). A worker that crashes, or runs out of memory, is
its invocations' rows and the others are measured; a job killed mid-comparison resumes under a plain rerun with
the (invocation, implementation) records it had kept (AC_FAULT's eval and cell items)."""
import json

import polars as pl

from abstraction_cost import tables

from .conftest import faults_config

EVAL = "results/study_a/backends/eval"
NUMERICS = ["fp32", "tf32", "bf16-autocast"]
IMPLEMENTATIONS = ("eager", "libtorch")


def _targets() -> list[str]:
    return [f"{EVAL}/{n}/{i}.rows.parquet" for i in IMPLEMENTATIONS for n in NUMERICS]


def _rows(work, implementation: str) -> dict[str, pl.DataFrame]:
    return {n: tables.read("backend_eval", work.path / EVAL / n / f"{implementation}.rows.parquet") for n in NUMERICS}


def _use_every_numerics(work) -> None:
    config = faults_config()
    config["study_a"]["backends"].update(numerics=NUMERICS, implementations=list(IMPLEMENTATIONS))
    work.write_config(config)


def test_a_crashing_or_out_of_memory_implementation_is_its_row_and_the_others_are_measured(work):
    _use_every_numerics(work)
    run = work.snakemake(*_targets(), AC_FAULT="eval:segv@fp32,eval:oom@bf16-autocast")
    assert run.returncode == 0, run.output[-4000:]
    assert work.jobs_run(run.output).count("eval_backend") == 3   # one job per numerics
    libtorch, eager = _rows(work, "libtorch"), _rows(work, "eager")
    crashed = libtorch["fp32"]   # every invocation's worker crashed: a row each, with the signal
    assert crashed["status"].to_list() == ["error", "error"] and crashed["invocation"].to_list() == [0, 1]
    assert "SIGSEGV" in crashed["message"][0], crashed["message"][0]
    assert (eager["fp32"]["status"] == "ok").all() and eager["fp32"]["invocation"].n_unique() == 2  # beside it
    assert (libtorch["tf32"]["status"] == "ok").all() and libtorch["tf32"].height >= 4
    assert libtorch["bf16-autocast"]["status"].to_list() == ["not_run"]
    oom = eager["bf16-autocast"]
    assert set(oom["status"]) == {"oom"} and "out of memory" in oom["message"][0]
    for rows in (*libtorch.values(), *eager.values()):
        assert rows["status"].null_count() == 0 and rows["run_id"].n_unique() == 1
    again = work.snakemake(*_targets())
    assert again.returncode == 0 and work.jobs_run(again.output) == []


def test_a_killed_eval_job_resumes_without_measuring_its_kept_invocations_again(work):
    _use_every_numerics(work)
    killed = work.snakemake(*_targets(), AC_FAULT="cell:kill@0")   # each job dies once its first record is kept
    assert killed.returncode != 0 and "eval_backend" in killed.output
    kept = {}
    for n in NUMERICS:
        cells = work.path / EVAL / f"{n}.env.cells"
        if (cells / "cell0.json").exists():
            kept[n] = json.loads((cells / "lineage.json").read_text())["run_id"]
    assert kept, "no job kept a record before it was killed"
    assert not any((work.path / t).exists() for t in _targets())   # a failed job's outputs are removed

    rerun = work.snakemake(*_targets())
    assert rerun.returncode == 0, rerun.output[-4000:]
    assert sorted(work.jobs_run(rerun.output)) == ["eval_backend"] * 3   # nothing before them again
    for n, run_id in kept.items():
        env = tables.read("environment", work.path / EVAL / f"{n}.env.parquet")
        assert env["run_id"].to_list() == [run_id] and env["resumes"][0] == 1   # the kept run goes on
        for implementation, rows in ((i, _rows(work, i)[n]) for i in IMPLEMENTATIONS):
            assert rows["run_id"].unique().to_list() == [run_id], implementation
            if implementation == "eager" or n != "bf16-autocast":
                assert (rows["status"] == "ok").all() and rows["invocation"].n_unique() == 2, (n, implementation)
        assert not (work.path / EVAL / f"{n}.env.cells").exists()   # done: a forced rerun measures afresh
    assert not work.leftovers()
