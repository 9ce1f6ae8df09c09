"""The smoke config end to end through Snakemake (the session's one run, conftest.smoke_run): every rule runs, every
table has its schema, the report renders."""
import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from abstraction_cost import tables
from abstraction_cost.study_a.sweep import summary as sweep_summary

from tests.fixtures.repository import REPO


def _table_of(path: Path) -> str:
    columns = pl.read_parquet_schema(path)
    names = [name for name, schema in tables.SCHEMAS.items() if list(schema) == list(columns)]
    assert len(names) == 1, f"{path}: its columns match no declared table schema ({list(columns)[:6]}...)"
    return names[0]


@pytest.mark.slow
def test_every_table_has_its_declared_schema_and_joins_the_environment(smoke_run):
    environment = tables.read("environment", smoke_run / "results" / "environment.parquet")
    known_runs = set(environment["run_id"])
    found = {}
    for path in sorted((smoke_run / "results").rglob("*.parquet")):
        name = _table_of(path)
        df = tables.read(name, path)
        found.setdefault(name, []).append(path)
        if name != "environment" and df.height:
            # derived rows (summaries, speedups) name every run they summarise, comma-separated
            # (the study's own reference rows, beside the sweep's kernels, are no run of this pipeline)
            runs = {r for joined in df["run_id"] for r in joined.split(",") if r != sweep_summary.STUDY_RUN_ID}
            assert runs <= known_runs, f"{path}: run_ids missing from environment.parquet: {sorted(runs - known_runs)[:3]}"
    assert "training" in found and "environment" in found


@pytest.mark.slow
def test_eager_training_on_digits_learns(smoke_run):
    training = tables.read("training", smoke_run / "results" / "study_a" / "training.parquet")
    digits = training.filter((pl.col("backend") == "eager") & (pl.col("dataset") == "digits") & (pl.col("phase") == "eval"))
    assert digits.height == 3 and (digits["status"] == "ok").all()
    # ten classes: chance is 0.10
    assert digits["accuracy"].max() > 0.4, digits.select("epoch", "loss", "accuracy")
    assert (digits["time_per_sample_ms"] > 0).all() and (digits["device"] == "cpu").all()


@pytest.mark.slow
def test_report_is_one_self_contained_file(smoke_run):
    html = (smoke_run / "results" / "report.html").read_text()
    assert "<script src=\"http" not in html and "<link href=\"http" not in html
    log = (smoke_run / "logs" / "report" / "report.log").read_text()
    assert "renderer" in log.lower()


@pytest.mark.slow
def test_report_time_makes_the_report_again_on_a_finished_run_with_its_charts_built_beforehand(smoke_run, tmp_path):
    """benchmarks/report_time.py on a copy of the smoke run: rule report alone, its job's seconds from its log, the
    charts' JavaScript built first by rule report_bundle (as a run builds it at its start), the page written again.
    A folder that is no finished run is refused, naming it."""
    import shutil
    shutil.copytree(smoke_run / "results", tmp_path / "results")
    (tmp_path / "results" / "report.html").unlink()
    out = tmp_path / "report_time.json"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "report_time.py"), "--workdir", str(tmp_path),
                           "--config", "config/smoke.yaml", "--rounds", "1", "--out", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    (runs,) = json.loads(out.read_text())["runs"].values()
    assert 0 < runs["job_s"][0] < runs["invocation_s"][0]
    assert (tmp_path / "results" / "report.html").is_file() and (tmp_path / "results" / "report_bundle.json").is_file()
    log = (tmp_path / "logs" / "report" / "report.log").read_text()
    assert "report rendered by" in log
    refused = subprocess.run([sys.executable, str(REPO / "benchmarks" / "report_time.py"), "--workdir",
                              str(tmp_path / "logs")], capture_output=True, text=True)
    assert refused.returncode != 0 and f"{tmp_path / 'logs'} has no results/ folder" in refused.stderr


@pytest.mark.slow
def test_compile_cache_compiles_every_study_b_graph_before_the_jobs(smoke_run):
    study_b = smoke_run / "results" / "study_b"
    # one warm-up per timing job that compiles anything (none for the gpu pair and reduce-overhead on the CPU)
    manifests = [json.loads(p.read_text()) for p in sorted((study_b / "compile-cache-manifests").rglob("*.json"))]
    assert len(manifests) == 6
    done = {(t["name"], t["pair"], t["mode"], t["what"]): t["status"] for m in manifests for t in m["tasks"]}
    assert done == {**{("squeezenet1_1", "cpu", "default", w): "ok" for w in ("whole", "blocks")},
                    **{(e, "cpu", "default", "cases"): "ok" for e in
                       ("matmul", "conv_ablation", "resnet50_convs", "resnet50_in_model", "conv_blocks")}}
    assert not any(m["skipped"] for m in manifests)
    assert any((study_b / "compile-cache").rglob("*.py")), "no generated code in the pipeline's Inductor cache"
    # every job reports its first calls' Inductor cache hits and misses, one lookup per compiled graph; the jobs hit
    # the warm-up's entries (compile/cache_key.py: before it, every lookup of a Snakemake job missed)
    log = (smoke_run / "logs" / "study_b" / "blocks" / "conv_blocks-cpu-default.log").read_text()
    lookups = re.findall(r"Inductor cache (\d+) hits (\d+) misses", log)
    assert lookups and all((int(h), int(m)) == (1, 0) for h, m in lookups), log


@pytest.mark.slow
def test_run_time_splits_the_smoke_runs_held_time_and_names_its_critical_path(smoke_run):
    """benchmarks/run_time.py on the smoke run's own log and results: one slot (the CPU), its held time wholly
    split, the backend comparison's jobs (one per numerics) each with a start-up before its measured runs, and a critical path
    of connected jobs that ends with the run's last job."""
    (log,) = (smoke_run / ".snakemake" / "log").glob("*.snakemake.log")
    out = smoke_run / "run_time.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "run_time.py"), str(log), "--results",
                    str(smoke_run / "results"), "--out", str(out)], check=True, capture_output=True)
    result = json.loads(out.read_text())
    (slot,) = result["slots"]
    parts = {k: slot[f"{k}_s"] for k in ("measuring", "start_up", "builds", "other", "idle")}
    assert slot["slot"] == "cpu" and slot["held_s"] > 0 and all(v >= 0 for v in parts.values()), slot
    assert sum(parts.values()) == pytest.approx(slot["held_s"], abs=1e-6), slot   # every second somewhere
    assert parts["measuring"] > 0 and parts["start_up"] > 0 and parts["builds"] > 0, slot   # build_native, warm-up
    timing_jobs = sum(r["finished"] for r in result["rules"] if r["timing"])
    assert slot["jobs"] == timing_jobs   # every timing job found its measured runs on the slot
    evals = next(r for r in result["rules"] if r["rule"] == "eval_backend")
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())["study_a"]["backends"]
    assert evals["finished"] == len(config["numerics"])   # one job per numerics, every implementation interleaved
    assert len(list((smoke_run / "results/study_a/backends/eval").glob("*.benchmark.tsv"))) == evals["finished"]
    path = result["critical_path"]
    assert path and path[-1]["end"] == result["last_end"] and path[-1]["rule"] in ("all", "report")
    for before, after in zip(path, path[1:]):
        assert after["start"] >= before["end"], path   # each step started once the one before it ended
    assert result["critical_path_s"] <= (dt.datetime.fromisoformat(result["last_end"])
                                         - dt.datetime.fromisoformat(result["first_start"])).total_seconds()
