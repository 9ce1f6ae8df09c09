"""Study A's backend comparison is one job per implementation that measures every numerics in turn
(backends/eval_job.py). A numerics whose C++ program crashes, or that runs out of memory, is its row and the
others are measured; a job killed between numerics resumes under a plain rerun without measuring the numerics it
had finished (AC_EVAL_FAULT, src/abstraction_cost/faults.py)."""
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
    config["study_a"]["backends"]["numerics"] = NUMERICS
    work.write_config(config)


def test_a_crashing_or_out_of_memory_numerics_is_its_row_and_the_others_are_measured(work):
    _use_every_numerics(work)
    run = work.snakemake(*_targets(), AC_EVAL_FAULT="segv@fp32,oom@bf16-autocast")
    assert run.returncode == 0, run.output[-4000:]
    assert work.jobs_run(run.output).count("eval_backend") == 2   # one job per implementation, not per numerics
    libtorch, eager = _rows(work, "libtorch"), _rows(work, "eager")
    crashed = libtorch["fp32"]
    assert crashed["status"].to_list() == ["error"] and "SIGSEGV" in crashed["message"][0], crashed["message"][0]
    assert (libtorch["tf32"]["status"] == "ok").all() and libtorch["tf32"].height >= 1   # measured after the crash
    assert libtorch["bf16-autocast"]["status"].to_list() == ["not_run"]
    assert (eager["fp32"]["status"] == "ok").all() and (eager["tf32"]["status"] == "ok").all()
    oom = eager["bf16-autocast"]
    assert oom["status"].to_list() == ["oom"] and "out of memory" in oom["message"][0]
    for rows in (*libtorch.values(), *eager.values()):
        assert rows["status"].null_count() == 0 and rows["run_id"].n_unique() == 1
    again = work.snakemake(*_targets())
    assert again.returncode == 0 and work.jobs_run(again.output) == []


def test_a_killed_eval_job_resumes_without_measuring_its_finished_numerics_again(work):
    _use_every_numerics(work)
    killed = work.snakemake(*_targets(), AC_EVAL_FAULT="kill@tf32")   # each job dies as its second numerics starts
    assert killed.returncode != 0 and "eval_backend" in killed.output
    kept = {i: tables.read("environment", work.path / EVAL / f"{i}.kept" / "fp32" / "env.parquet")["run_id"][0]
            for i in IMPLEMENTATIONS}
    assert not any((work.path / t).exists() for t in _targets())   # a failed job's outputs are removed

    rerun = work.snakemake(*_targets())
    assert rerun.returncode == 0, rerun.output[-4000:]
    assert sorted(work.jobs_run(rerun.output)) == ["eval_backend", "eval_backend"]   # nothing before them again
    for implementation in IMPLEMENTATIONS:
        log = (work.path / f"logs/study_a/backends/eval-{implementation}.log").read_text()
        assert f"fp32/{implementation}: kept from an earlier attempt" in log, log[-3000:]
        assert f"tf32/{implementation}:" in log and f"bf16-autocast/{implementation}:" in log
        rows = _rows(work, implementation)
        assert rows["fp32"]["run_id"].unique().to_list() == [kept[implementation]]   # not measured again
        assert rows["tf32"]["run_id"][0] != kept[implementation] and (rows["tf32"]["status"] == "ok").all()
        env = tables.read("environment", work.path / EVAL / "fp32" / f"{implementation}.env.parquet")
        assert env["run_id"].to_list() == [kept[implementation]]
        assert not (work.path / EVAL / f"{implementation}.kept").exists()   # done: a forced rerun measures afresh
    assert not work.leftovers()
