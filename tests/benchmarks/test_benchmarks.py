"""The benchmarks run (tiny, on the CPU); their numbers are not asserted here."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from abstraction_cost import config as config_module

from tests.fixtures.repository import REPO


def test_harness_overhead_benchmark_runs(tmp_path):
    out = tmp_path / "overhead.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "harness_overhead.py"), "--device", "cpu", "--batch", "2",
                    "--resolution", "32", "--steps", "2", "--rounds", "2", "--out", str(out)], check=True,
                   capture_output=True)
    result = json.loads(out.read_text())
    assert result["bare_ms_per_step"] > 0 and result["harness_wall_ms_per_step"] > 0
    assert result["nvml_status"] == "no CUDA device in use"


def test_eager_drift_benchmark_runs(tmp_path):
    out = tmp_path / "drift.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "eager_drift.py"), "--pair", "cpu", "--model",
                    "squeezenet1_1", "--resolution", "64", "--rounds", "2", "--repeats", "1", "--backend", "eager",
                    "--out", str(out)], check=True, capture_output=True)
    rows = json.loads(out.read_text())["rows"]
    checkpoints = {r["checkpoint"] for r in rows}
    assert checkpoints == {"fresh", "whole_compiled", "units_compiled", "chain", "among_variants", "after_profiler"}
    assert {r["protocol"] for r in rows} == {"plain", "hygienic"} and all(r["median_ms"] > 0 for r in rows)
    assert all(r["ratio_to_fresh"] == 1.0 for r in rows if r["checkpoint"] == "fresh")


def test_sweep_overhead_benchmark_runs(tmp_path):
    out = tmp_path / "sweep_overhead.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "sweep_overhead.py"), "--config",
                    str(REPO / "config" / "smoke.yaml"), "--device", "cpu", "--implementations", "eager",
                    "--numerics", "fp32", "tf32", "--out", str(out)], check=True, capture_output=True)
    result = json.loads(out.read_text())
    (job,) = result["jobs"]  # one job walks both transfer modes in both numerics
    assert job["implementation"] == "eager" and job["numerics"] == ["fp32", "tf32"]
    assert job["ok_cells"] == job["cells"] == 16 and 0 < job["timed_s"] < job["wall_s"]
    assert set(job["timed_s_by_numerics"]) == {"fp32", "tf32"} and all(job["timed_s_by_numerics"].values())


def test_sweep_overhead_from_a_run_reads_each_jobs_wall_time_and_keeps_builds_apart(tmp_path):
    """--from-run: the wall time from rule sweep's Snakemake benchmark file, the timed calls from its tables; a
    compiled job's builds (in its wall time) are not overhead, aoti's package time (another job's) is not taken."""
    import polars as pl

    from abstraction_cost import tables
    jobs = tmp_path / "jobs"
    cells = {"compiled-default": [(10.0, 4, 30.0)], "aoti": [(100.0, 10, 50.0), (None, None, 50.0)]}
    for impl, rows in cells.items():
        for numerics in ("fp32", "tf32"):
            (jobs / numerics).mkdir(parents=True, exist_ok=True)
            tables.write("sweep", [{**dict.fromkeys(tables.schema("sweep")), "run_id": "r", "implementation": impl,
                                    "numerics": numerics, "device": "cuda", "status": "ok" if t else "oom",
                                    "time_ms": t, "repeats": n, "build_s": b}
                                   for t, n, b in rows], jobs / numerics / f"{impl}.rows.parquet")
            pl.DataFrame({"gpu_name": ["H100"], "torch_version": ["2.11"]}).write_parquet(
                jobs / numerics / f"{impl}.env.parquet")
        (jobs / f"{impl}.benchmark.tsv").write_text("s\th:m:s\tmax_rss\n100.0\t0:01:40\t1.0\n")
    out = tmp_path / "overhead.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "sweep_overhead.py"), "--from-run", str(tmp_path),
                    "--out", str(out)], check=True, capture_output=True)
    by_impl = {j["implementation"]: j for j in json.loads(out.read_text())["jobs"]}
    compiled, aoti = by_impl["compiled-default"], by_impl["aoti"]
    assert compiled["timed_s"] == 0.08 and compiled["build_s"] == 60.0 and compiled["wall_s"] == 100.0
    assert abs(compiled["outside_timed_pct"] - 39.92) < 1e-9
    assert aoti["timed_s"] == 2.0 and aoti["build_s"] == 0.0 and abs(aoti["outside_timed_pct"] - 98.0) < 1e-9
    assert aoti["numerics"] == ["fp32", "tf32"] and aoti["gpu"] == "H100" and aoti["ok_cells"] == 2


def test_host_input_benchmark_runs_and_checks_both_ways_agree(tmp_path):
    out = tmp_path / "host_input.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "host_input.py"), "--points", "3:16", "--pool", "2",
                    "--repeats", "1", "--out", str(out)], check=True, capture_output=True)
    rows = json.loads(out.read_text())["rows"]
    assert [(r["batch"], r["resolution"], r["transfer"]) for r in rows] == [(3, 16, "float32-pageable"),
                                                                            (3, 16, "uint8-pinned")]
    assert rows[0]["bytes"] == 3 * 3 * 16 * 16 * 4 and all(r["in_place_s"] >= 0 for r in rows)


def test_run_time_reads_each_jobs_start_and_end_from_snakemake_logs(tmp_path):
    first = tmp_path / "first.snakemake.log"
    first.write_text("""Building DAG of jobs...
[Mon Nov 23 14:50:25 2026]
localrule sweep:
    output: results/study_a/sweep/jobs/fp32/eager.rows.parquet
    jobid: 5
    wildcards: numerics=fp32, implementation=eager
[Mon Nov 23 14:50:25 2026]
localrule sweep_inputs:
    jobid: 2
[Mon Nov 23 14:50:31 2026]
Finished jobid: 2 (Rule: sweep_inputs)
1 of 3 steps (33%) done
[Mon Nov 23 14:50:35 2026]
Finished jobid: 5 (Rule: sweep)
[Mon Nov 23 14:50:35 2026]
localrule sweep:
    jobid: 6
[Mon Nov 23 14:50:47 2026]
Error in rule sweep:
    message: None
    jobid: 6
""")
    second = tmp_path / "second.snakemake.log"  # the resumed run: its job ids are its own
    second.write_text("[Mon Nov 23 15:00:00 2026]\nrule sweep:\n    jobid: 5\n")
    out = tmp_path / "run_time.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "run_time.py"), str(first), str(second), "--out",
                    str(out)], check=True, capture_output=True)
    result = json.loads(out.read_text())
    sweep, inputs = result["rules"]
    assert (sweep["rule"], sweep["timing"], sweep["jobs"], sweep["finished"], sweep["failed"], sweep["unfinished"],
            sweep["job_s"], sweep["longest_s"]) == ("sweep", True, 3, 1, 1, 1, 22.0, 12.0)
    assert (inputs["rule"], inputs["timing"], inputs["job_s"]) == ("sweep_inputs", False, 6.0)
    assert result["timing_job_s"] == 22.0 and result["last_end"] == "2026-11-23T14:50:47"


def test_repeatability_runs_the_sweep_twice_and_compares_every_cell(tmp_path):
    """Two Snakemake runs of the smoke config's sweep (the second forced), every ok cell compared."""
    import yaml
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config["study_a"]["sweep"].update(batches=[1], resolutions=[16], transfers=["float32-pageable"])
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "repeatability.json"
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "repeatability.py"), "--configfile",
                             str(tmp_path / "config.yaml"), "--workdir", str(tmp_path), "--cores", "2",
                             "--out", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(out.read_text())
    assert [r["forced"] for r in data["runs"]] == [[], ["sweep"]]
    # each run's rules' seconds, from what its own Snakemake printed: the first builds, the second measures again
    assert {"prepare_dataset", "sweep", "concat_sweep"} <= set(data["runs"][0]["rules_s"])
    assert "sweep" in data["runs"][1]["rules_s"] and "prepare_dataset" not in data["runs"][1]["rules_s"]
    sweep = data["tables"]["sweep"]["run2_vs_run1"]
    assert sweep["cells"] == 2  # eager and libtorch at the one cell
    assert all(r["ratio"] > 0 and r["covered"] in (True, False) for r in sweep["ratios"])
    assert 0 <= sweep["within_10pct"] <= 1 and sweep["coverage"] is not None
    assert data["spread"]["sweep"]["time_ms"]["cells"] == 2 and data["spread"]["sweep"]["time_ms"]["max"] >= 1
    # each run's host speed, from its sweep jobs' environment rows, so a slower host can be told from noise
    speeds = list(data["host_speed"].values())
    assert len(speeds) == 2 and all(s["host_op_us"] > 0 and s["host_copy_gbps"] > 0 for s in speeds)
    assert data["device"] == "cpu" and "host run2 / run1" in result.stdout
    # a 2-core machine pins no timing slot, so no turn was placed or probed
    assert list(data["turns_against_probes"].values()) == [None, None]
    # one saved run: its own variance and host, nothing to compare
    alone = tmp_path / "alone.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "repeatability.py"), "--from-runs",
                    data["dirs"][0], "--out", str(alone)], check=True, capture_output=True)
    one = json.loads(alone.read_text())
    assert one["tables"] == {"sweep": {}} and list(one["variance_components"]) == [data["dirs"][0]]


def _repeatability():
    import importlib.util
    spec = importlib.util.spec_from_file_location("repeatability", REPO / "benchmarks" / "repeatability.py")
    module = sys.modules["repeatability"] = importlib.util.module_from_spec(spec)   # its dataclass needs it
    spec.loader.exec_module(module)
    return module


def test_repeatability_sets_each_turns_time_against_its_probe():
    import polars as pl
    repeatability = _repeatability()
    probes = [1.4, 2.8, 1.5, 2.6, 1.6, 3.0]
    blocks = pl.DataFrame({"numerics": "fp32", "implementation": ["eager"] * 6 + ["cudnn"] * 6,
                           "cell": 0, "invocation": 0, "turn": list(range(6)) * 2, "calls": 8,
                           "time_ms": [p * 2.5 for p in probes] + [20.0, 20.1, 19.9, 20.0, 20.2, 19.8],
                           "cpu": 3, "host_op_us": probes * 2})
    found = repeatability.turns_against_probes(blocks)
    by = {c["implementation"]: c for c in found["by_cell"]}
    assert by["eager"]["spearman"] == 1.0 and abs(by["cudnn"]["spearman"]) < 0.5   # host-bound follows its probe
    assert by["eager"]["turns"] == 6 and by["eager"]["probe_us_max"] == 3.0
    unprobed = blocks.with_columns(host_op_us=pl.lit(None, pl.Float64))
    assert repeatability.turns_against_probes(unprobed) is None
    assert repeatability.turns_against_probes(blocks.drop("cpu", "host_op_us")) is None


def test_repeatability_gives_the_blocks_spread_over_runs_of_their_speedups_and_medians(tmp_path):
    """Study B's blocks from saved runs: per case the largest median over the runs against the smallest, for the
    speedup and for the eager and compiled medians beside it."""
    import polars as pl
    repeatability = _repeatability()
    dirs = []
    for k, (eager, compiled) in enumerate([(0.05, 0.15), (0.10, 0.15), (0.06, 0.18)]):
        d = tmp_path / f"run{k}"
        d.mkdir()
        pl.DataFrame({"n": [1, 2], "in_channels": 3, "channels": 64, "kernel": 3, "batch": 1, "resolution": 224,
                      "pair": "gpu", "mode": "default", "status": ["ok", "error"],
                      "eager_median_ms": [eager, None], "compiled_median_ms": [compiled, None],
                      "speedup": [eager / compiled, None], "speedup_low": [eager / compiled * 0.9, None],
                      "speedup_high": [eager / compiled * 1.1, None]}).write_parquet(d / "conv_blocks.speedups.parquet")
        dirs.append(str(d))
    result = repeatability.main(["--from-runs", *dirs, "--tables", "blocks_conv_blocks",
                                 "--out", str(tmp_path / "blocks.json")])
    spread = result["spread"]["blocks_conv_blocks"]
    assert spread["eager_median_ms"]["max"] == pytest.approx(2.0)          # 0.10 / 0.05; the error case left out
    assert spread["compiled_median_ms"]["max"] == pytest.approx(1.2)
    assert spread["speedup"]["max"] == pytest.approx((0.10 / 0.15) / (0.05 / 0.15))
    assert spread["speedup"]["cells"] == 1 and spread["speedup"]["widest"]["runs"] == 3
    assert result["tables"]["blocks_conv_blocks"]["run2_vs_run1"]["coverage"] == 0.0   # 2x outside ±10%


def test_repeatability_alternates_an_overlay_and_sets_each_run_against_its_neighbour(tmp_path, monkeypatch):
    """--overlay: base, overlay, overlay, base, each Snakemake run under its own config files; each setting against
    itself, and each overlay run against the base run next to it in time."""
    import polars as pl
    repeatability = _repeatability()
    made = []

    def fake_run(workdir, configfiles, chosen, forced, cores, saved, extra=(), env=None):
        made.append([Path(c).name for c in configfiles])
        shift = 1.2 if configfiles[-1] == "off.yaml" else 1.0       # the overlay makes every cell 20% slower
        drift = 1 + 0.01 * len(made)                          # and the host drifts by 1% a run
        times = [t * shift * drift for t in (2.0, 5.0)]
        saved.mkdir(parents=True)
        pl.DataFrame({"numerics": "fp32", "implementation": "eager", "cell": [0, 1], "status": "ok",
                      "time_ms": times, "time_ms_low": [t * 0.97 for t in times],
                      "time_ms_high": [t * 1.03 for t in times]}).write_parquet(saved / "sweep.parquet")
        return 1.0, ""

    monkeypatch.setattr(repeatability, "run_and_save", fake_run)
    out = tmp_path / "result.json"
    result = repeatability.main(["--configfile", "base.yaml", "python.yaml", "--overlay", "off.yaml", "--runs", "4",
                                 "--workdir", str(tmp_path), "--out", str(out)])
    base = ["base.yaml", "python.yaml"]
    assert made == [base, [*base, "off.yaml"], [*base, "off.yaml"], base]
    assert [r["condition"] for r in result["runs"]] == ["base", "overlay", "overlay", "base"]
    sweep = result["conditions"]["sweep"]
    assert set(sweep["across"]) == {"overlay run2_vs_base run1", "overlay run3_vs_base run4"}
    assert sweep["across"]["overlay run2_vs_base run1"]["ratio_geomean"] == pytest.approx(1.2 * 1.02 / 1.01)
    assert sweep["across"]["overlay run3_vs_base run4"]["ratio_geomean"] == pytest.approx(1.2 * 1.03 / 1.04)
    assert sweep["within"]["base: run4_vs_run1"]["ratio_geomean"] == pytest.approx(1.04 / 1.01)
    assert sweep["within"]["overlay: run3_vs_run2"]["max_deviation"] == pytest.approx(1.03 / 1.02 - 1)
    assert "ratios" not in sweep["across"]["overlay run2_vs_base run1"]   # the per-cell ratios stay in "tables"
    # each setting's spread over its own runs: the host's drift alone, the overlay's shift cancelled
    assert sweep["spread"]["base"]["time_ms"]["max"] == pytest.approx(1.04 / 1.01)
    assert sweep["spread"]["overlay"]["time_ms"]["max"] == pytest.approx(1.03 / 1.02)
    assert result["spread"]["sweep"]["time_ms"]["max"] == pytest.approx(1.2 * 1.03 / 1.01)
    # the same from the saved folders, each named with its setting; a count that does not match is refused
    again = repeatability.main(["--from-runs", *result["dirs"], "--conditions", "base", "overlay", "overlay", "base",
                                "--out", str(tmp_path / "again.json")])
    assert again["conditions"]["sweep"] == sweep
    with pytest.raises(SystemExit):
        repeatability.main(["--from-runs", *result["dirs"], "--conditions", "base", "overlay", "--out", str(out)])
    assert repeatability.alternating(6) == ["base", "overlay", "overlay", "base", "base", "overlay"]


def _fake_snakemake(monkeypatch, repeatability, output=lambda k: ""):
    """subprocess.run for repeatability's Snakemake runs: each call's forced rules, environment, and which of the
    workflow's compile caches were there when it started; it writes the sweep table and fills the workflow's caches
    again (as the warm-up would), printing output(k) for its k-th call."""
    import dataclasses

    import polars as pl
    # the sweep's turns, speedups and environment rows left out: read from real runs only
    sweep = dataclasses.replace(repeatability.MEASURED["sweep"], extras=())
    monkeypatch.setitem(repeatability.MEASURED, "sweep", sweep)
    calls = []

    def run(command, capture_output, text, env=None):
        workdir = Path(command[command.index("--directory") + 1])
        forced = command[command.index("--forcerun") + 1:] if "--forcerun" in command else []
        caches = {c: (workdir / c).exists() for c in repeatability.WORKFLOW_CACHES}
        calls.append({"forced": forced, "env": env, "caches_there": caches})
        table = workdir / repeatability.MEASURED["sweep"].path
        table.parent.mkdir(parents=True, exist_ok=True)
        pl.DataFrame({"numerics": "fp32", "implementation": "eager", "cell": [0], "status": "ok",
                      "time_ms": [2.0]}).write_parquet(table)
        for cache in repeatability.WORKFLOW_CACHES:
            (workdir / cache).mkdir(parents=True, exist_ok=True)
            (workdir / cache / "entry").write_text("built")
        return subprocess.CompletedProcess(command, 0, stdout=output(len(calls)), stderr="")

    monkeypatch.setattr(repeatability.subprocess, "run", run)
    return calls


@pytest.mark.parametrize("cold", [True, False])
def test_repeatability_cold_runs_each_from_fresh_compile_caches_and_forces_the_warm_up(tmp_path, monkeypatch,
                                                                                        cold):
    """--cold: each run's Snakemake gets fresh Inductor and Triton caches of its own, the workflow's compile
    caches and warm-up manifests are gone when it starts, and the warm-up is forced with the sweep, on the first run
    too where the table is there already; the user's own cache is left alone. Without it none of this."""
    repeatability = _repeatability()
    calls = _fake_snakemake(monkeypatch, repeatability)
    mine = tmp_path / "my-inductor-cache"
    (mine / "entry").parent.mkdir()
    (mine / "entry").write_text("the user's")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(mine))
    workdir = tmp_path / "work"
    for cache in repeatability.WORKFLOW_CACHES:   # an earlier run's warm-up
        (workdir / cache).mkdir(parents=True)
        (workdir / cache / "entry").write_text("built")
    (workdir / "runs" / "2" / "caches" / "inductor").mkdir(parents=True)   # an earlier call's run 2
    (workdir / "runs" / "2" / "caches" / "inductor" / "stale").write_text("warm")
    (workdir / repeatability.MEASURED["sweep"].path).parent.mkdir(parents=True, exist_ok=True)
    (workdir / repeatability.MEASURED["sweep"].path).write_bytes(b"")   # the first run is not a fresh one
    result = repeatability.main(["--configfile", "base.yaml", "--runs", "2", *(["--cold"] if cold else []),
                                 "--workdir", str(workdir), "--out", str(tmp_path / "result.json")])
    forced = ["compile_cache_sweep", "sweep"] if cold else ["sweep"]
    assert [c["forced"] for c in calls] == [forced, forced] and [r["forced"] for r in result["runs"]] == [forced] * 2
    assert (mine / "entry").read_text() == "the user's" and os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(mine)
    if not cold:
        assert [c["env"] for c in calls] == [None, None]   # this process's environment, as it is
        assert all(all(c["caches_there"].values()) for c in calls)
        return
    assert [c["caches_there"] for c in calls] == [dict.fromkeys(repeatability.WORKFLOW_CACHES, False)] * 2
    for k, call in enumerate(calls, start=1):
        caches = workdir / "runs" / str(k) / "caches"
        assert call["env"]["TORCHINDUCTOR_CACHE_DIR"] == str(caches / "inductor")
        assert call["env"]["TRITON_CACHE_DIR"] == str(caches / "triton")
        assert call["env"]["PATH"] == os.environ["PATH"]   # the rest of the environment kept
        assert not any((caches / "inductor").iterdir()) and not any((caches / "triton").iterdir())


def test_repeatability_reads_each_runs_rule_seconds_from_its_own_snakemake_output(tmp_path, monkeypatch, capsys):
    """rules_s: per rule, the summed seconds of the jobs that run's Snakemake printed (not an earlier run's)."""
    repeatability = _repeatability()

    def output(k):
        sweep_s = 40 + k   # run 1: 41 s, run 2: 42 s in two jobs
        return f"""Building DAG of jobs...
[Mon Nov 23 14:50:00 2026]
localrule compile_cache_sweep:
    output: results/study_a/sweep/compile-cache-manifests/fp32-shard0.json
    jobid: 3
    wildcards: numerics=fp32, shard=0
[Mon Nov 23 14:50:30 2026]
Finished jobid: 3 (Rule: compile_cache_sweep)
[Mon Nov 23 14:50:30 2026]
rule sweep:
    jobid: 1
    wildcards: numerics=fp32, shard=0
[Mon Nov 23 14:50:40 2026]
Finished jobid: 1 (Rule: sweep)
[Mon Nov 23 14:50:40 2026]
rule sweep:
    jobid: 2
    wildcards: numerics=fp32, shard=1
[Mon Nov 23 14:51:{sweep_s - 30:02d} 2026]
Finished jobid: 2 (Rule: sweep)
"""

    _fake_snakemake(monkeypatch, repeatability, output)
    result = repeatability.main(["--configfile", "base.yaml", "--runs", "2", "--cold", "--workdir", str(tmp_path),
                                 "--out", str(tmp_path / "result.json")])
    assert [r["rules_s"] for r in result["runs"]] == [{"sweep": 41.0, "compile_cache_sweep": 30.0},
                                                      {"sweep": 42.0, "compile_cache_sweep": 30.0}]
    printed = capsys.readouterr().out
    assert "run 2: " in printed and "s; sweep 42 s, compile_cache_sweep 30 s\n" in printed
    # both runs' output kept in the working directory's log
    assert (tmp_path / "repeatability.snakemake.log").read_text() == output(1) + output(2)


def test_repeatability_refuses_cold_with_saved_runs(tmp_path, capsys):
    """--cold says how runs made here start; --from-runs makes none."""
    repeatability = _repeatability()
    with pytest.raises(SystemExit):
        repeatability.main(["--from-runs", str(tmp_path), "--cold", "--out", str(tmp_path / "result.json")])
    assert "--cold" in capsys.readouterr().err

def _log_stamp(epoch: float) -> str:
    import datetime as dt
    return dt.datetime.fromtimestamp(epoch).strftime("[%a %b %d %H:%M:%S %Y]")   # Snakemake's: local time


T0 = 1_800_000_000.0


def _run_time_of(tmp_path, jobs, environment: dict, sweep: dict | None = None, script: str = "run_time.py",
                 args: tuple = ()) -> dict:
    """run_time.py (or another reader of a run: `script`) --results on a Snakemake log of `jobs` (jobid, rule,
    wildcards, start, end, inputs, outputs; seconds after T0, each started and finished in that order) and the run's
    environment rows."""
    import datetime as dt

    import polars as pl
    lines = ["Building DAG of jobs..."]
    for jobid, rule, wildcards, start, _, inputs, outputs in jobs:
        lines += [_log_stamp(T0 + start), f"localrule {rule}:"] + ([f"    input: {inputs}"] if inputs else []) + [
            f"    output: {outputs}", f"    jobid: {jobid}"] + ([f"    wildcards: {wildcards}"] if wildcards else []) + [
            "    resources: tmpdir=/tmp", "Select jobs to execute..."]
    for jobid, rule, *_, end, _, _ in sorted(jobs, key=lambda j: j[4]):
        lines += [_log_stamp(T0 + end), f"Finished jobid: {jobid} (Rule: {rule})"]
    log = tmp_path / "run.snakemake.log"
    log.write_text("\n".join(lines) + "\n")
    results = tmp_path / "results"
    (results / "study_a").mkdir(parents=True)
    iso = lambda s: dt.datetime.fromtimestamp(T0 + s, dt.timezone.utc).isoformat(timespec="milliseconds")  # noqa: E731
    pl.DataFrame({**{k: v for k, v in environment.items() if k not in ("start", "end")},
                  "started_at": [iso(t) for t in environment["start"]], "ended_at": [iso(t) for t in environment["end"]]}
                 ).write_parquet(results / "environment.parquet")
    if sweep is not None:
        pl.DataFrame(sweep).write_parquet(results / "study_a" / "sweep.parquet")
    out = tmp_path / "run_time.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / script), str(log), "--results", str(results),
                    "--out", str(out), *args], check=True, capture_output=True)
    return json.loads(out.read_text())


def _parts(slot: dict) -> dict:
    return {k: slot[f"{k}_s"] for k in ("measuring", "start_up", "builds", "other", "idle")}


def test_run_time_splits_each_slots_held_time_and_finds_the_critical_path(tmp_path):
    """A build, an eval job with two measured runs, a compiled sweep job whose runs record 4 s of builds, a
    concatenation: each second of the 42 s run is measuring, start-up, builds, other or idle, and the chain that
    ended last is build -> sweep -> concat, the sweep having waited 12 s for its slot."""
    program, evals, sweeps = "native/build/ac_libtorch", "eval/fp32/eager.rows.parquet", "sweep/compiled.rows.parquet"
    result = _run_time_of(tmp_path, [
        (1, "build_native", "", 0, 10, "", program),
        (2, "eval_backend", "implementation=eager", 10, 20, program, evals),
        (3, "sweep", "implementation=compiled-default", 22, 40, program, sweeps),
        (4, "concat", "", 40, 42, f"{evals}, {sweeps}", "all")],
        {"run_id": ["r1", "r2", "s1"], "rule": ["eval_backend", "eval_backend", "sweep"], "device": ["cpu"] * 3,
         "gpu_uuid": [None] * 3, "job": ["implementation=eager,numerics=fp32", "implementation=eager,numerics=tf32",
                                         "implementation=compiled-default,numerics=fp32"],
         "start": [13, 16, 24], "end": [15, 19, 38]},
        sweep={"run_id": ["s1", "s1"], "implementation": ["compiled-default"] * 2, "build_s": [2.0, 2.0]})
    (slot,) = result["slots"]
    assert slot["slot"] == "cpu" and slot["held_s"] == 42.0 and slot["jobs"] == 2
    assert _parts(slot) == {"measuring": 15.0, "start_up": 5.0, "builds": 14.0, "other": 4.0, "idle": 4.0}
    # idle between the two timing jobs (20-22 s) and after the last, while the concatenation ran (40-42 s)
    assert (slot["idle_start_s"], slot["idle_gaps_s"], slot["idle_end_s"]) == (0.0, 2.0, 2.0)
    # the builds: the sweep's compiled builds inside its run, and the slot waiting while build_native ran
    assert (slot["loading_s"], slot["loading_rules_s"], slot["waiting_s"]) == (4.0, {"eval_backend": 0.0,
                                                                                       "sweep": 4.0}, 10.0)
    assert [(s["rule"], s["waited_s"]) for s in result["critical_path"]] == [
        ("build_native", None), ("sweep", 12.0), ("concat", 0.0)]
    assert result["critical_path_s"] == 30.0


def test_run_time_finds_the_gate_the_last_build_a_timing_job_read_and_the_slots_work_after_it(tmp_path):
    """Two GPUs: a training job times from 0 to 12 s on GPU-a while the package builds (0-20 s); the comparison
    (20-30 s, GPU-a) and the sweep (22-40 s, GPU-b, staged from 18 s: its slot taken at 22 s) read the package.
    A C++ build ending later (35 s) is read by no timing job, so it gates nothing. The gate is the package: after it
    the slots held 10 + 18 s, 14 s each, and the last timing job ended 20 s after it. A run with no build that a
    timing job read has no gate."""
    import datetime as dt
    iso = lambda s: dt.datetime.fromtimestamp(T0 + s, dt.timezone.utc).isoformat(timespec="milliseconds")  # noqa: E731
    package = "results/study_a/backends/aoti"
    result = _run_time_of(tmp_path, [(1, "package_aoti", "", 0, 20, "", package),
                                     (2, "train_eager", "seed=0", 0, 12, "", "t"),
                                     (3, "build_native_cudnn", "", 0, 35, "", "native/build/ac_cudnn"),
                                     (4, "eval_backend", "numerics=fp32", 20, 30, package, "e"),
                                     (5, "sweep", "numerics=fp32, shard=0", 18, 40, package, "s")],
                          {"run_id": ["t1", "e1", "s1"], "rule": ["train_eager", "eval_backend", "sweep"],
                           "device": ["cuda"] * 3, "gpu_uuid": ["GPU-a", "GPU-a", "GPU-b"],
                           "job": ["seed=0", "numerics=fp32", "numerics=fp32,shard=0"],
                           "gpu_slot_taken_at": [iso(0), iso(20), iso(22)], "start": [1, 21, 23], "end": [11, 29, 39]})
    gated = result["gate"]
    assert (gated["rule"], gated["end_s"], gated["slots"]) == ("package_aoti", 20.0, 2)
    assert (gated["slot_s_after"], gated["even_s"], gated["last_timing_end_s"]) == (28.0, 14.0, 20.0)
    (tmp_path / "no_build").mkdir()
    alone = _run_time_of(tmp_path / "no_build", [(1, "train_eager", "seed=0", 0, 12, "", "t")],
                         {"run_id": ["t1"], "rule": ["train_eager"], "device": ["cuda"], "gpu_uuid": ["GPU-a"],
                          "job": ["seed=0"], "start": [1], "end": [11]})
    assert alone["gate"] is None


def test_every_rule_run_time_counts_as_a_build_is_a_rule_of_the_workflow():
    """A renamed build or warm-up rule would drop out of the slots' waiting time into their idle time."""
    import re
    sys.path.insert(0, str(REPO / "benchmarks"))
    import run_time
    rules = {m.group(1) for path in (REPO / "workflow" / "rules").glob("*.smk")
             for m in re.finditer(r"^\s*rule (\w+):", path.read_text(), re.M)}
    assert set(run_time.BUILD_RULES) <= rules, set(run_time.BUILD_RULES) - rules
    assert {"compile_cache_blocks", "compile_cache_model", "compile_cache_sweep"} <= set(run_time.BUILD_RULES)


def test_every_warm_up_repeatability_forces_with_cold_is_a_rule_of_the_workflow():
    """--cold forces each table's warm-ups: a renamed one would fail every run, and a table whose measuring rule
    compiles without its warm-up named would start warm."""
    import re
    repeatability = _repeatability()
    rules = {m.group(1) for path in (REPO / "workflow" / "rules").glob("*.smk")
             for m in re.finditer(r"^\s*rule (\w+):", path.read_text(), re.M)}
    warm_ups = {name: m.warm_ups for name, m in repeatability.MEASURED.items()}
    assert {rule for names in warm_ups.values() for rule in names} <= rules
    assert all(warm_ups[name] for name in warm_ups if name != "backend_comparison"), warm_ups


def test_run_time_counts_the_workers_start_ups_inside_measured_runs_as_start_up(tmp_path):
    """The same run, with each measured run's worker start-ups in its environment row (1 s in the first eval run,
    none in the second, 3 s in the sweep's): 4 s move from measuring to start-up, and nothing else changes. Where
    a row records its workers' loading (the second eval run's 2 s, the sweep's 5 s), that is its builds, in place
    of the sweep table's compiled builds (4 s)."""
    program, evals, sweeps = "native/build/ac_libtorch", "eval/fp32/eager.rows.parquet", "sweep/compiled.rows.parquet"
    jobs = [(1, "build_native", "", 0, 10, "", program),
            (2, "eval_backend", "implementation=eager", 10, 20, program, evals),
            (3, "sweep", "implementation=compiled-default", 22, 40, program, sweeps),
            (4, "concat", "", 40, 42, f"{evals}, {sweeps}", "all")]
    environment = {"run_id": ["r1", "r2", "s1"], "rule": ["eval_backend", "eval_backend", "sweep"],
                   "device": ["cpu"] * 3, "gpu_uuid": [None] * 3,
                   "job": ["implementation=eager,numerics=fp32", "implementation=eager,numerics=tf32",
                           "implementation=compiled-default,numerics=fp32"], "start": [13, 16, 24], "end": [15, 19, 38]}
    sweep = {"run_id": ["s1", "s1"], "implementation": ["compiled-default"] * 2, "build_s": [2.0, 2.0]}
    result = _run_time_of(tmp_path, jobs, {**environment, "worker_start_s": [1.0, None, 3.0]}, sweep=sweep)
    (slot,) = result["slots"]
    assert _parts(slot) == {"measuring": 11.0, "start_up": 9.0, "builds": 14.0, "other": 4.0, "idle": 4.0}
    loads = {"worker_start_s": [1.0, None, 3.0], "worker_load_s": [None, 2.0, 5.0]}
    (tmp_path / "loads").mkdir()
    result = _run_time_of(tmp_path / "loads", jobs, {**environment, **loads}, sweep=sweep)
    (slot,) = result["slots"]
    assert _parts(slot) == {"measuring": 8.0, "start_up": 9.0, "builds": 17.0, "other": 4.0, "idle": 4.0}
    assert (slot["loading_s"], slot["loading_rules_s"], slot["waiting_s"]) == (7.0, {"eval_backend": 2.0,
                                                                                       "sweep": 5.0}, 10.0)


@pytest.mark.parametrize("second_gpu, bound", [("GPU-a", "gpu_load"), ("GPU-b", "places")])
def test_run_time_says_whether_the_gpus_load_or_a_place_held_a_waiting_path(tmp_path, second_gpu, bound):
    """The last job's input is made at 2 s but it starts at 30 s, after a 28 s job: where that job held the same
    GPU, the GPU's load held the path; where it ran on another GPU, this one stood idle while the path waited."""
    result = _run_time_of(tmp_path, [(1, "build_native", "", 0, 2, "", "program"),
                                     (2, "eval_backend", "implementation=eager", 2, 30, "", "e"),
                                     (3, "eval_backend", "implementation=libtorch", 30, 35, "program", "l")],
                          {"run_id": ["r1", "r2"], "rule": ["eval_backend"] * 2, "device": ["cuda"] * 2,
                           "gpu_uuid": [second_gpu, "GPU-a"], "start": [3, 31], "end": [29, 34],
                           "job": ["implementation=eager,numerics=fp32", "implementation=libtorch,numerics=fp32"]})
    assert [(step["jobid"], step["waited_s"]) for step in result["critical_path"]] == [(1, None), (3, 28.0)]
    assert result["bound"]["by"] == bound and result["bound"]["path_ran_s"] == 7.0
    assert result["bound"]["gpu_busy_pct"] == (100.0 if bound == "gpu_load" else 20.0)


@pytest.mark.parametrize("taken, start, end, slot_wait", [
    (10, [2, 11], [9, 18], 6.0),   # the first job holds the slot to its end, 10 s (as before gpu_slots.release)
    (8, [2, 9], [7, 18], 4.0),     # it gives the slot back at 8 s (gpu_slots.release) and exits at 10 s
])
def test_run_time_counts_a_staged_jobs_slot_time_from_its_take_to_the_next_take(tmp_path, taken, start, end,
                                                                               slot_wait):
    """The second job starts (staged) at 4 s while the first times, and takes the GPU at `taken`: its imports
    before that are not the slot's start-up; where the first gave the slot back before its end, the second's take
    ends the first's time on the slot (its exit is nobody's 'other'). Either way the slot's parts add up to its
    held time."""
    import datetime as dt
    iso = lambda s: dt.datetime.fromtimestamp(T0 + s, dt.timezone.utc).isoformat(timespec="milliseconds")  # noqa: E731
    result = _run_time_of(tmp_path, [(1, "eval_backend", "numerics=fp32", 0, 10, "", "a"),
                                     (2, "eval_backend", "numerics=tf32", 4, 19, "", "b")],
                          {"run_id": ["r1", "r2"], "rule": ["eval_backend"] * 2, "device": ["cuda"] * 2,
                           "gpu_uuid": ["GPU-a"] * 2, "job": ["numerics=fp32", "numerics=tf32"],
                           "gpu_slot_taken_at": [iso(0), iso(taken)], "start": start, "end": end})
    (slot,) = result["slots"]
    assert slot["held_s"] == 19.0 and slot["jobs"] == 2
    assert _parts(slot) == {"measuring": 14.0, "start_up": 3.0, "builds": 0.0, "other": 2.0, "idle": 0.0}
    assert slot["rules_s"] == {"eval_backend": 19.0}   # `taken` and 19 - `taken` s on the slot
    # the critical path ends with the staged job, part of whose 15 s went to waiting for the first job's GPU
    assert [(step["jobid"], step["slot_wait_s"]) for step in result["critical_path"]] == [(2, slot_wait)]


def test_run_time_places_jobs_that_started_in_one_second_without_a_take_of_their_own():
    """A run recorded before gpu_slot_taken_at: two timing jobs on the one slot started in the same second (the
    log's stamps are whole seconds), so their slot times begin at once; each is placed, neither clipped."""
    import datetime as dt
    sys.path.insert(0, str(REPO / "benchmarks"))
    import run_time
    at = lambda s: dt.datetime.fromtimestamp(T0 + s)  # noqa: E731
    a = run_time.Job("eval_backend", at(0), at(10), wildcards="numerics=fp32")
    b = run_time.Job("eval_backend", at(0), at(20), wildcards="numerics=tf32")
    placed = run_time.on_slots([a, b], [], ["GPU-a"])
    assert {(p.taken - T0, p.given_back - T0) for p in placed.values()} == {(0.0, 10.0), (0.0, 20.0)}


def test_run_time_gives_each_gpu_the_measured_runs_of_its_own_jobs(tmp_path):
    """Two eval jobs at once on two GPUs: each job's measured run is found by its wildcards, not by its times
    alone (the aoti job's run ends within a second of the eager job's end)."""
    result = _run_time_of(tmp_path, [(1, "eval_backend", "implementation=eager", 0, 10, "", "e"),
                                     (2, "eval_backend", "implementation=aoti", 2, 12, "", "a")],
                          {"run_id": ["r1", "r2", "f1"], "rule": ["eval_backend"] * 2 + ["flops"],
                           "device": ["cuda"] * 2 + ["cpu"], "gpu_uuid": ["GPU-a", "GPU-b", None],
                           "start": [3, 4, 11], "end": [9, 11, 12],
                           "job": ["implementation=eager,numerics=fp32", "implementation=aoti,numerics=fp32", ""]})
    by_slot = {s["slot"]: s for s in result["slots"]}
    assert sorted(by_slot) == ["GPU-a", "GPU-b"]  # the summary's cpu environment row is no slot
    assert _parts(by_slot["GPU-a"]) == {"measuring": 6.0, "start_up": 3.0, "builds": 0.0, "other": 1.0, "idle": 2.0}
    assert _parts(by_slot["GPU-b"]) == {"measuring": 7.0, "start_up": 2.0, "builds": 0.0, "other": 1.0, "idle": 2.0}
    assert by_slot["GPU-a"]["held_s"] == by_slot["GPU-b"]["held_s"] == 12.0


def test_run_time_gives_each_gpu_its_own_sweep_shard_and_that_shards_builds(tmp_path):
    """Two shards of the fp32 sweep at once on two GPUs (rule sweep, wildcards numerics and shard): each slot gets
    the measured run of its own shard, found by the shard in its environment row, and the compiled builds that
    shard's rows record (by run_id), counted as builds, not measuring; the share of held time measuring is over
    both slots."""
    result = _run_time_of(tmp_path, [(1, "sweep", "numerics=fp32, shard=0", 0, 20, "", "s0"),
                                     (2, "sweep", "numerics=fp32, shard=1", 0, 20, "", "s1")],
                          {"run_id": ["a", "b"], "rule": ["sweep"] * 2, "device": ["cuda"] * 2,
                           "gpu_uuid": ["GPU-a", "GPU-b"], "start": [2, 5], "end": [18, 19],
                           "job": ["numerics=fp32,shard=0", "numerics=fp32,shard=1"]},
                          sweep={"run_id": ["a", "a", "b", "b"], "implementation": ["compiled-default", "eager"] * 2,
                                 "build_s": [3.0, None, 5.0, None]})
    by_slot = {s["slot"]: s for s in result["slots"]}
    assert _parts(by_slot["GPU-a"]) == {"measuring": 13.0, "start_up": 2.0, "builds": 3.0, "other": 2.0, "idle": 0.0}
    assert _parts(by_slot["GPU-b"]) == {"measuring": 9.0, "start_up": 5.0, "builds": 5.0, "other": 1.0, "idle": 0.0}
    assert result["measuring_share"] == pytest.approx(22.0 / 40.0)


def test_measuring_share_is_the_gpus_share_and_leaves_out_the_cpu_lane_beside_them():
    """gpus.cpu_beside adds a `cpu` slot to a GPU run: its idle time is not GPU time (the H100 run of 2026-11-27
    read 62% with it, 73% without); a CPU run's one slot is still its measure."""
    run_time = _benchmark("run_time")
    slots = [{"slot": "GPU-a", "held_s": 10.0, "measuring_s": 7.0}, {"slot": "GPU-b", "held_s": 10.0,
             "measuring_s": 8.0}, {"slot": "cpu", "held_s": 10.0, "measuring_s": 1.0}]
    assert run_time.measuring_share(slots) == pytest.approx(15.0 / 20.0)
    assert run_time.measuring_share(slots[2:]) == pytest.approx(0.1)


def test_the_share_of_the_timing_jobs_time_leaves_out_the_slots_waits_and_idle_time():
    """What no schedule can raise: measuring over the jobs' own time on the GPU slots (start-ups, loading, other),
    the waits while builds ran and the idle time left out, and the CPU lane beside the GPUs too."""
    run_time = _benchmark("run_time")
    parts = ("held_s", "measuring_s", "start_up_s", "loading_s", "waiting_s", "other_s", "idle_s")
    slots = [{"slot": "GPU-a", **dict(zip(parts, (100.0, 60.0, 10.0, 10.0, 12.0, 0.0, 8.0)))},
             {"slot": "GPU-b", **dict(zip(parts, (100.0, 40.0, 5.0, 15.0, 0.0, 0.0, 40.0)))},
             {"slot": "cpu", **dict(zip(parts, (100.0, 10.0, 0.0, 0.0, 0.0, 0.0, 90.0)))}]
    assert run_time.measuring_share(slots) == pytest.approx(100.0 / 200.0)
    assert run_time.jobs_share(slots) == pytest.approx(100.0 / 140.0)
    assert run_time.jobs_share([{"slot": "GPU-a", **dict.fromkeys(parts, 0.0)}]) is None


def _replayed(tmp_path, cpu_start: float, cpu_end: float, concat_start: float, *args: str) -> dict:
    """A build, two eval jobs at once on two GPUs, the CPU pair's vision job, their concatenation."""
    program, jobs = "native/build/ac_libtorch", ["e.parquet", "a.parquet", "c.parquet"]
    return _run_time_of(tmp_path, [
        (1, "build_native", "", 0, 10, "", program),
        (2, "eval_backend", "implementation=eager", 10, 20, program, jobs[0]),
        (3, "eval_backend", "implementation=aoti", 10, 20, program, jobs[1]),
        (4, "vision_model", "pair=cpu, model=resnet50", cpu_start, cpu_end, program, jobs[2]),
        (5, "concat", "", concat_start, concat_start + 2, ", ".join(jobs), "all")],
        {"run_id": ["r1", "r2", "r3"], "rule": ["eval_backend"] * 2 + ["vision_model"],
         "device": ["cuda", "cuda", "cpu"], "gpu_uuid": ["GPU-a", "GPU-b", None],
         "job": ["implementation=eager,numerics=fp32", "implementation=aoti,numerics=fp32", "pair=cpu,model=resnet50"],
         "start": [11, 11, cpu_start + 1], "end": [19, 19, cpu_end - 1]},
        script="replay_on_gpus.py", args=("--gpus", "1", "2", *args))


def test_replay_on_one_gpu_queues_the_gpu_jobs_and_keeps_the_cpu_lane_only_where_the_run_had_it(tmp_path):
    """replay_on_gpus.py: on the run's two GPUs it gives the run's span back; on one, the two eval jobs queue on
    the slot. The CPU pair's job keeps its lane beside the GPUs where it overlapped them in the run, and takes the
    one GPU's slot where it ran alone."""
    (tmp_path / "beside").mkdir(), (tmp_path / "alone").mkdir()
    beside = _replayed(tmp_path / "beside", 10, 25, 25)
    assert beside["cpu_beside"] and beside["run_gpus"] == 2 and "not measured" in beside["estimate"]
    assert beside["run_span_s"] == beside["replay_on_run_gpus_s"] == beside["replays"]["2"] == 27
    # eager 10-20, aoti 20-30 beside the CPU job 10-25; concat 30-32 (the check exact: scaled by 1)
    assert beside["replays"]["1"] == beside["scaled_s"]["1"] == 32
    alone = _replayed(tmp_path / "alone", 20, 35, 35)
    assert not alone["cpu_beside"] and alone["replay_on_run_gpus_s"] == alone["run_span_s"] == 37
    assert alone["replays"]["1"] == 47            # eager 10-20, aoti 20-30, then the CPU job alone 30-45; concat


def test_replay_scales_a_rules_jobs_as_a_what_if_and_keeps_the_runs_own_check(tmp_path):
    """--scale build_native=0.5: the build 5 s, so on two GPUs eager and aoti 5-15 beside the CPU job 5-20, concat
    20-22; on one GPU concat ends at 27; the check (the run on its own two GPUs) stays the run's 27."""
    (tmp_path / "half").mkdir()
    result = _replayed(tmp_path / "half", 10, 25, 25, "--scale", "build_native=0.5")
    assert result["scale"] == {"build_native": 0.5} and result["replay_on_run_gpus_s"] == 27
    assert result["replays"] == {"1": 27, "2": 22}
    for k, (wrong, message) in enumerate((("vision=0.5", "no job of rule 'vision'"),
                                          ("build_native=fast", "must be a number"),
                                          ("build_native=0", "must be positive"))):
        (tmp_path / str(k)).mkdir()
        with pytest.raises(subprocess.CalledProcessError) as err:
            _replayed(tmp_path / str(k), 10, 25, 25, "--scale", wrong)
        assert message in err.value.stderr.decode(), wrong


def test_default_estimate_schedules_every_timing_job_family_and_says_it_is_an_estimate(tmp_path):
    """benchmarks/default_estimate.py on the default config: labelled an estimate, two GPUs faster than one, each
    slot's busy time within the schedule, and the calibration reproduces gpu-smoke's measured one-GPU time."""
    runs = {}
    for config, gpus in (("config", 1), ("config", 2), ("gpu-smoke", 1)):
        out = tmp_path / f"{config}-{gpus}.json"
        done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "default_estimate.py"),
                               str(REPO / "config" / f"{config}.yaml"), "--gpus", str(gpus), "--out", str(out)],
                              check=True, capture_output=True, text=True)
        assert done.stdout.startswith("ESTIMATE for")
        runs[(config, gpus)] = json.loads(out.read_text())
    one, two = runs[("config", 1)], runs[("config", 2)]
    assert one["estimate"] is True and two["total_s"] < one["total_s"]
    assert set(two["families_s"]) == {"training", "backend comparison", "sweep and kernels", "Study B on the GPU",
                                      "Study B on the CPU"} and all(s > 0 for s in two["families_s"].values())
    assert len(two["slot_busy_s"]) == 2 and max(two["slot_busy_s"]) <= two["gpu_schedule_s"]
    estimate = _benchmark("default_estimate")
    assert estimate.estimate(estimate.measured_gpu_smoke(), 1)["calibrated_s"] == pytest.approx(
        estimate.GPU_SMOKE_MEASURED_S, abs=0.5)
    assert runs[("gpu-smoke", 1)]["calibrated_s"] < estimate.GPU_SMOKE_MEASURED_S - 120  # resized since


def test_default_estimate_puts_the_cpu_pairs_jobs_beside_the_gpus_with_cpu_beside():
    """gpus.cpu_beside: the CPU timing jobs on a lane of their own, so the run is the longer lane, not their sum."""
    estimate = _benchmark("default_estimate")
    config = config_module.load(REPO / "config" / "config.yaml")
    alone = estimate.estimate({**config, "gpus": {**config["gpus"], "cpu_beside": False}}, 2)
    beside = estimate.estimate({**config, "gpus": {**config["gpus"], "cpu_beside": True}}, 2)
    assert not alone["cpu_beside"] and beside["cpu_beside"]
    assert alone["total_s"] == pytest.approx(alone["fixed_s"] + alone["gpu_schedule_s"] + alone["cpu_timing_jobs_s"])
    assert beside["fixed_s"] + beside["gpu_schedule_s"] <= beside["total_s"] < alone["total_s"]


def test_default_estimate_takes_the_sweeps_cold_builds_off_its_slot_with_the_compile_warm_up():
    """study_a.sweep.compile_warm_up: the cold compiles leave the sweep job (it starts once they and its AOTInductor
    package are done); a warm-up whose modes autotune holds a GPU slot, so it is a job of the GPU schedule."""
    estimate = _benchmark("default_estimate")
    config = config_module.load(REPO / "config" / "config.yaml")
    sweep = config["study_a"]["sweep"]
    jobs = lambda **keys: {j["job"]: j for j in estimate.sweep_jobs({**config, "study_a": {  # noqa: E731
        **config["study_a"], "sweep": {**sweep, **keys}}})}
    cold, warm = jobs(compile_warm_up=False), jobs(compile_warm_up=True)
    builds = max(estimate.COMPILE_BUILD_S[m] for m in sweep["compile_modes"])
    assert cold["sweep[fp32,shard0]"]["s"] - warm["sweep[fp32,shard0]"]["s"] == pytest.approx(builds)
    assert warm["sweep[fp32,shard0]"]["after"] >= builds and not any(j.startswith("compile_cache") for j in warm)
    autotuned = jobs(compile_warm_up=True, compile_modes=["default", "max-autotune"])
    assert autotuned["compile_cache_sweep[fp32,shard0]"]["s"] == estimate.COMPILE_BUILD_S["max-autotune"]


def _benchmark(name: str):
    """A benchmark script imported as a module (they import one another from their folder)."""
    import importlib
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


def test_the_profiled_pass_ab_tells_an_effect_beyond_the_interval_from_none():
    """Four runs' cells (ABBA): an unprofiled arm within the cells' precision of the profiled one reads as no
    effect; one 10% slower in every cell, against half-widths of 2%, does not."""
    import polars as pl
    pp = _benchmark("profiled_pass")
    keys = ["implementation"]

    def run(factor: float, jitter: float) -> pl.DataFrame:
        medians = [1.0 * factor * (1 + jitter), 2.0 * factor * (1 - jitter), 3.0 * factor]
        return pl.DataFrame({"implementation": ["a", "b", "c"], "median": medians,
                             "low": [m * 0.98 for m in medians], "high": [m * 1.02 for m in medians]})

    profiled = [run(1.0, 0.0), run(1.0, 0.005)]
    same = pp.effect({"profiled": profiled, "unprofiled": [run(1.0, -0.005), run(1.0, 0.003)]}, keys)
    assert same["cells"] == 3 and same["ab_within_half_width"] == 1.0
    assert same["verdict"].startswith("the profiled pass moves no")
    slower = pp.effect({"profiled": profiled, "unprofiled": [run(1.1, 0.0), run(1.1, 0.005)]}, keys)
    assert slower["ab_within_half_width"] == 0.0 and abs(slower["median_ratio_unprofiled_over_profiled"] - 1.1) < 0.01
    assert slower["verdict"].startswith("the profiled pass moves timed medians")
    none = pp.effect({"profiled": profiled, "unprofiled": [run(1.0, 0.0).head(0), run(1.0, 0.0).head(0)]}, keys)
    assert none["cells"] == 0 and none["verdict"].startswith("no ok cell")


def test_the_profiled_pass_ab_sets_the_pass_in_the_named_section_only(tmp_path):
    import yaml
    pp = _benchmark("profiled_pass")
    config = yaml.safe_load((REPO / "config" / "gpu-smoke.yaml").read_text())
    arm = pp.arm_config(config, "backend_comparison", 0, ["fp32"])
    assert arm["study_a"]["backends"]["protocol"]["profile_calls"] == 0
    assert arm["study_a"]["backends"]["numerics"] == ["fp32"] and config["study_a"]["backends"]["numerics"] != ["fp32"]
    assert arm["study_a"]["sweep"] == config["study_a"]["sweep"]
    with pytest.raises(SystemExit, match="--numerics: \\['fp64'\\] not in study_a.backends.numerics"):
        pp.arm_config(config, "backend_comparison", 5, ["fp64"])


def test_host_cores_benchmark_runs(tmp_path):
    out = tmp_path / "host_cores.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "host_cores.py"), "--passes", "1", "--probe-cpus", "1",
                    "--processes", "1", "--out", str(out)], check=True, capture_output=True)
    result = json.loads(out.read_text())
    assert len(result["per_cpu"]) == len(result["cpus"]) and all(r["op_us"] > 0 for r in result["per_cpu"])
    assert all(s["max_over_min"] >= 1 for s in result["processes"].values())


def test_turn_cpu_benchmark_runs_both_arms_interleaved_and_probes_only_the_candidates(tmp_path):
    out = tmp_path / "turn_cpu.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "turn_cpu.py"), "--seconds", "0.5", "--turn-ms", "5",
                    "--out", str(out)], check=True, capture_output=True)
    result = json.loads(out.read_text())
    arms = [r["arm"] for r in result["rows"]]
    assert arms[:4] == ["fixed", "probed", "probed", "fixed"]   # ABBA
    assert result["arms"]["fixed"]["turns"] == result["arms"]["probed"]["turns"] > 0
    assert {r["cpu"] for r in result["rows"] if r["arm"] == "probed"} <= set(result["candidates"])
    assert all(r["cpu"] == result["fixed_cpu"] for r in result["rows"] if r["arm"] == "fixed")


def test_cache_hit_build_times_a_cold_then_warm_processes_builds_by_phase(tmp_path):
    """Fresh processes on one cache: each build's first call, the cache counters and torch.compile's phase timers
    (here dynamo alone, the eager backend, on the CPU: the timers and the process plumbing, not Inductor); with
    --profile, the build's functions of most cumulative time, dynamo's among them; --inductor's settings in each."""
    chb = _benchmark("cache_hit_build")
    out = tmp_path / "chb.json"
    result = chb.main(["--build", "vision", "--model", "squeezenet1_1", "--backend", "eager", "--device", "cpu",
                       "--batch", "1", "--resolutions", "32", "--runs", "1", "--profile", "30",
                       "--inductor", "fx_graph_cache=false", "aot_inductor.precompile_headers=false",
                       "--out", str(out)])
    assert [p["state"] for p in result["processes"]] == ["cold", "warm"]
    for proc in result["processes"]:
        assert proc["builds"][0]["input"] == [1, 3, 32, 32] and proc["builds"][0]["first_call_s"] > 0
        assert proc["phases"]["bytecode_tracing"] > 0 and proc["recompiles"] == []   # one shape, one build
        assert proc["aot_autograd_traces"] == 0   # the eager backend: dynamo alone
        cumulative = [row["cumulative_s"] for row in proc["profile"]]
        assert len(cumulative) == 30 and cumulative == sorted(cumulative, reverse=True)
        assert any("convert_frame" in row["function"] for row in proc["profile"])
        assert proc["inductor"] == {"fx_graph_cache": False, "aot_inductor.precompile_headers": False}
    assert json.loads(out.read_text())["settings"]["backend"] == "eager"
    with pytest.raises(SystemExit):
        chb.main(["--build", "sweep", "--backend", "eager"])


def test_dag_start_times_dry_runs_and_finds_no_torch_imported(tmp_path):
    out = tmp_path / "dag_start.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "dag_start.py"), "--runs", "1", "--out", str(out)],
                   check=True, capture_output=True)
    result = json.loads(out.read_text())
    assert result["times_s"][0] > 0 and result["summary"]["median_s"] == result["times_s"][0]
    assert result["torch_imported"] is False and result["imported"] == []


def test_dag_start_sees_a_workflow_that_imports_torch(tmp_path):
    """The same detection where the Snakefile imports torch (as main's common.smk did)."""
    (tmp_path / "Snakefile").write_text("import torch\n\n\nrule all:\n    output: 'x'\n    shell: 'touch x'\n")
    (tmp_path / "config.yaml").write_text("{}\n")
    out = tmp_path / "dag_start.json"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "dag_start.py"), "--runs", "1", "--repo", str(tmp_path),
                    "--configfile", str(tmp_path / "config.yaml"), "--out", str(out)], check=True, capture_output=True)
    result = json.loads(out.read_text())
    assert result["torch_imported"] is True and result["imported"] == ["torch"]


SLOT_SIZE_RULES = """
configfile: "config.yaml"
include: "{gpu_slots}"
rule vision_model:
    output: "out/{{pair}}-{{model}}.parquet"
    log: "logs/{{pair}}-{{model}}.log"
    resources: **timing_job("vision_model")
    script: "job.py"
"""
SLOT_SIZE_JOB = """
import polars as pl
slots = snakemake.config.get("gpus", {}).get("slots") or 0   # the first run, making the inputs: none
with open(snakemake.log[0], "w") as log:   # the lines a vision job logs, with this run's gpus.slots for a core list
    log.write(f"CPU affinity: timing slot 0: as-of-{slots}\\nworkers up and prepared in {slots}.5 s\\n")
# its environment rows, two measured runs: one started workers, one did not
pl.DataFrame({"torch_threads": [1, 1], "worker_start_s": [float(slots), None], "worker_load_s": [2.0 * slots, None],
              "cpu_affinity": [f"slot of {slots}", f"slot of {slots}"]}).write_parquet(snakemake.output[0])
"""


def test_slot_size_reruns_one_timing_job_per_size_interleaved_and_reads_its_log(tmp_path, monkeypatch):
    from abstraction_cost.measure import gpu_slots
    monkeypatch.setenv(gpu_slots.FAKE_GPUS_ENV, "2")
    work = tmp_path / "work"
    work.mkdir()
    (work / "config.yaml").write_text(json.dumps({"device": "auto"}))
    (work / "job.py").write_text(SLOT_SIZE_JOB)
    (work / "Snakefile").write_text(SLOT_SIZE_RULES.format(gpu_slots=REPO / "workflow" / "rules" / "gpu_slots.smk"))
    out = tmp_path / "slot_size.json"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "slot_size.py"), "--snakefile",
                           str(work / "Snakefile"), "--config", str(work / "config.yaml"), "--target",
                           "out/gpu-m.parquet", "--log", "logs/gpu-m.log", "--workdir", str(work), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    runs = result["runs"]
    assert [r["gpus_slots"] for r in runs] == [1, 2, 2, 1] and all(r["returncode"] == 0 for r in runs)
    # each run reran the job with its own size (its log rewritten) and read the phases from it
    assert [r["slot_cores"] for r in runs] == ["as-of-1", "as-of-2", "as-of-2", "as-of-1"]
    assert [r["workers_prepared_s"] for r in runs] == [[1.5], [2.5], [2.5], [1.5]]
    # and what the job's environment rows say, the workers' phases summed over its measured runs
    assert [(r["torch_threads"], r["worker_start_s"], r["worker_load_s"], r["cpu_affinity"]) for r in runs] == [
        (1, 1.0, 2.0, "slot of 1"), (1, 2.0, 4.0, "slot of 2"), (1, 2.0, 4.0, "slot of 2"), (1, 1.0, 2.0, "slot of 1")]
    assert set(result["median_wall_s"]) == {"1", "2"} and all(v > 0 for v in result["median_wall_s"].values())


def test_slot_size_refuses_more_slots_than_the_box_has_gpus(tmp_path, monkeypatch):
    from abstraction_cost.measure import gpu_slots
    monkeypatch.setenv(gpu_slots.FAKE_GPUS_ENV, "1")
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "slot_size.py"), "--slots", "1", "2",
                           "--workdir", str(tmp_path), "--out", str(tmp_path / "x.json")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--slots 2 needs that many GPUs; this box has 1" in done.stderr
    assert not (tmp_path / "x.json").exists()


def _job_log(path, lines: list[tuple[float, str]]) -> None:
    """A job's log: (seconds after 12:00:00, message) per line, stamped as setup_logging stamps them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = lambda s: f"2026-11-29 12:{int(s) // 60:02d}:{s % 60:06.3f}".replace(".", ",")  # noqa: E731
    path.write_text("".join(f"{stamp(s)} INFO rule.x: {m}\n" for s, m in lines))


def test_slot_handoffs_reads_each_jobs_end_on_its_slot_and_counts_only_staged_successors(tmp_path):
    """Three jobs on GPU 0: the first gives its slot back at 10 s and the staged second takes it at 10.2 s; the
    second, a job of before release(), ends with its last line at 20 s and the staged third takes the slot at 21.5 s;
    a fourth starts only after the third ends (not staged: its wait is no handoff); a job on GPU 1 and a log of no
    timing job are their own."""
    logs = tmp_path / "logs"
    _job_log(logs / "a.log", [(0, "start"), (1, "GPU slot: GPU 0 (GPU-x) after 0.0 s"), (9.9, "rows"),
                              (10, "GPU slot: GPU 0 given back")])
    _job_log(logs / "b.log", [(2, "start"), (10.2, "GPU slot: GPU 0 (GPU-x) after 8.2 s"), (20, "rows")])
    _job_log(logs / "sub" / "c.log", [(5, "start"), (21.5, "GPU slot: GPU 0 (GPU-x) after 16.5 s"),
                                      (30, "GPU slot: GPU 0 given back")])
    _job_log(logs / "d.log", [(31, "start"), (33, "GPU slot: GPU 0 (GPU-x), free when the job started (...)"),
                              (40, "GPU slot: GPU 0 given back")])
    _job_log(logs / "e.log", [(3, "start"), (4, "GPU slot: GPU 1 (GPU-y) after 0.0 s"), (8, "rows")])
    _job_log(logs / "concat.log", [(41, "wrote the table")])
    sys.path.insert(0, str(REPO / "benchmarks"))
    import slot_handoffs
    out = tmp_path / "handoffs.json"
    slot_handoffs.main([str(logs), "--out", str(out)])
    (run,) = json.loads(out.read_text())["runs"]
    assert (run["jobs"], run["given_back"], run["handoffs"]) == (5, 3, 2)
    assert run["handoffs_s"] == [0.2, 1.5] and run["median_s"] == 0.85 and run["sum_s"] == 1.7
    with pytest.raises(SystemExit):
        slot_handoffs.main([str(tmp_path / "missing")])


def test_cuda_contexts_refuses_without_a_gpu_and_summarises_a_round(tmp_path):
    """On this machine it says it needs a CUDA GPU and writes nothing; its summary and CPU list on fake records.
    It runs on the GPU machine (docs/results/2026-11-29-h200-worker-start-and-lent-cores.md)."""
    cuda_contexts = _benchmark("cuda_contexts")
    import torch
    if not torch.cuda.is_available():
        out = tmp_path / "contexts.json"
        done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "cuda_contexts.py"), "--out", str(out)],
                              capture_output=True, text=True)
        assert done.returncode != 0 and "torch sees no CUDA GPU here" in done.stderr and not out.exists()
    from abstraction_cost.measure import affinity   # its --cpus parser
    assert affinity.parse_cpu_list("0-3,8") == {0, 1, 2, 3, 8}
    s = cuda_contexts.summary([{"context_s": 1.0, "first_alloc_s": 0.1, "late_s": 0.0},
                               {"context_s": 3.0, "first_alloc_s": 0.2, "late_s": 0.5}])
    assert (s["processes"], s["context_s_median"], s["context_s_max"], s["late_s_max"]) == (2, 2.0, 3.0, 0.5)


def test_summary_intervals_times_rounds_in_fresh_interpreters_and_keeps_what_they_computed(tmp_path):
    out = tmp_path / "intervals.json"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "summary_intervals.py"), "--shapes", "3x20",
                           "--rounds", "2", "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(out.read_text())
    assert found["summary"]["n"] == 2 and len(found["times_s"]) == 2 and found["device"] == "cpu"
    (result,) = found["results"]
    assert result["shape"] == [3, 20]
    for key in ("interval", "speedup"):
        estimate, low, high = result[key]
        assert low <= estimate <= high
    refused = subprocess.run([sys.executable, str(REPO / "benchmarks" / "summary_intervals.py"), "--results",
                              str(tmp_path), "--out", str(out)], capture_output=True, text=True)
    assert refused.returncode == 2 and "--results needs --config" in refused.stderr
