"""The README's main command on a machine with no network and no GPU: the default config's DAG (its datasets,
implementations and models, tiny sizes: tests/fixtures/offline_default.py) runs to the report through the real
rules. Every step that needs a dataset is `missing` naming it and why, every GPU step `not_run`, both where both
apply; the report lists the failed downloads with the command that retries them. Also: the workflow from another
directory (`-s PATH/Snakefile`, `-d DIR`) finds its default config."""
import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from abstraction_cost import tables
from abstraction_cost.data import prepared
from abstraction_cost.study_a import inputs_manifest, transfer
from tests.fixtures import loopback, offline_default
from tests.fixtures.repository import own_native_build

from .conftest import REPO

DATASETS = ("mnist", "cifar10", "stl10", "voc2012")   # the default config's, all downloaded


# Scheduling only: with no GPU and no dataset every timing job of this run is not_run or missing, measuring nothing,
# so two may run at once (the profile's totals let one CPU timing job hold the machine: gpu_slots.smk). 55 timing
# jobs one at a time were most of this run's time on a 2-core CI machine.
TWO_TIMING_JOBS_AT_ONCE = ("--resources", "timing=2", "compile=4")


def _snakemake(work: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Snakemake on `work`, with the C++ programs built in it: the repository's native/build is every run's, and a
    run beside this one that planned the builds before they existed runs them too, after this run's; Snakemake then
    touches the programs, and this run's rerun would redo every job that ran them."""
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(work),
               "--workflow-profile", str(REPO / "profiles" / "default"), "--cores", "2", *TWO_TIMING_JOBS_AT_ONCE,
               *args]
    env = own_native_build(work)
    result = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env)
    result.output = result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("offline-default")
    # every download's host is a loopback port where nothing listens: refused at once, as with no network
    config = offline_default.write(work / "config.yaml", loopback.refused_url())
    result = _snakemake(work, "--configfile", str(config))
    (work / "snakemake.out").write_text(result.output)
    assert result.returncode == 0, result.output[-6000:]
    return work


def _rows(work: Path, table: str, path: str) -> pl.DataFrame:
    return tables.read(table, work / "results" / path)


@pytest.mark.slow
def test_offline_default_run_ends_with_the_report_and_a_rerun_has_nothing_to_do(offline_run):
    assert (offline_run / "results" / "report.html").stat().st_size > 0
    again = _snakemake(offline_run, "--configfile", str(offline_run / "config.yaml"))
    assert again.returncode == 0 and "Nothing to be done" in again.output, again.output[-4000:]


@pytest.mark.slow
def test_every_row_of_a_missing_dataset_names_it_and_says_not_run_too(offline_run):
    training = _rows(offline_run, "training", "study_a/training.parquet")
    assert set(training["dataset"]) == set(DATASETS) and (training["status"] == "missing").all()
    for dataset, message in training.select("dataset", "message").iter_rows():
        assert message.startswith(f"{dataset}: resources/{dataset}/"), message
        assert "download failed" in message and "Connection refused" in message, message
        assert f"--forcerun resources/{dataset}/download.json" in message, message
        assert message.endswith("no CUDA GPU on this machine and study_a.training.require_gpu is true"), message
    sweep = pl.concat([_rows(offline_run, "sweep", "study_a/sweep.parquet"),
                       _rows(offline_run, "sweep_kernels", "study_a/sweep_kernels.parquet")
                       .filter(pl.col("source") != "study")], how="diagonal_relaxed")
    assert sweep.height and (sweep["status"] == "missing").all()
    assert sweep["message"].str.starts_with("voc2012: resources/voc2012/").all()
    assert sweep["message"].str.contains("not_run on this machine even with it: no CUDA GPU").all()


@pytest.mark.slow
def test_what_needs_no_dataset_is_not_run_and_nothing_is_an_error(offline_run):
    eval_rows = _rows(offline_run, "backend_eval", "study_a/backend_eval.parquet")
    assert (eval_rows["status"] == "not_run").all() and eval_rows["message"].str.contains("require_gpu").all()
    statuses = {}
    for path in sorted((offline_run / "results").rglob("*.parquet")):
        columns = pl.read_parquet_schema(path)
        if "status" in columns:
            for status in pl.read_parquet(path, columns=["status"])["status"].unique():
                statuses.setdefault(status, []).append(str(path.relative_to(offline_run)))
    assert set(statuses) <= {"ok", "not_run", "missing"}, {s: p[:3] for s, p in statuses.items()}


@pytest.mark.slow
def test_report_lists_failed_downloads_and_says_what_a_cpu_could_not_measure(offline_run):
    html = (offline_run / "results" / "report.html").read_text()
    for dataset in DATASETS:
        assert f"dataset={dataset}" in html and f"--forcerun resources/{dataset}/download.json" in html
    assert "No job of this run had a GPU" in html
    assert html.index("No job of this run had a GPU") < html.index("Numerics of every figure")   # at the top
    assert "snakemake --cores all --configfile config/smoke.yaml" in html


# ------------------------------------------------------------------------------------- other directories
@pytest.mark.slow
@pytest.mark.parametrize("where", ["-s PATH/Snakefile from DIR", "-d DIR from the repository"])
def test_the_default_config_is_found_from_any_working_directory(tmp_path, where):
    work = tmp_path / "run"
    work.mkdir()
    command = [sys.executable, "-m", "snakemake", "--cores", "1", "--dry-run", "--quiet", "rules"]
    if where.startswith("-s"):
        command += ["-s", str(REPO / "Snakefile")]
        cwd = work
    else:
        command += ["-d", str(work)]
        cwd = REPO
    result = subprocess.run(command, capture_output=True, text=True, cwd=cwd)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert "download_dataset" in result.stdout and "sweep_inputs" in result.stdout   # the default config's DAG


# ------------------------------------------------------------------------------------- the sweep's inputs
def test_sweep_rows_of_a_missing_dataset_say_so(tmp_path):
    prepared.write_missing(tmp_path / "voc", "voc2012", "download failed; to retry: x")
    inputs_manifest.write_missing(tmp_path / "inputs", prepared.missing_reason(tmp_path / "voc"))
    assert json.loads((tmp_path / "inputs" / inputs_manifest.MANIFEST).read_text())["status"] == "missing"
    with pytest.raises(prepared.MissingDataset, match="voc2012: download failed"):
        transfer.Pool(tmp_path / "inputs")
    rows = pl.DataFrame({"status": ["not_run", "error", "error", "ok"],
                         "message": ["no GPU", "MissingDataset: voc2012: download failed", "SIGSEGV", None]})
    marked = inputs_manifest.with_missing_inputs(rows, tmp_path / "inputs")
    assert marked["status"].to_list() == ["missing", "missing", "error", "ok"]
    assert marked["message"].to_list() == [
        "voc2012: download failed; to retry: x; and not_run on this machine even with it: no GPU",
        "voc2012: download failed; to retry: x", "SIGSEGV", None]
