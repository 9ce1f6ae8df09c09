"""benchmarks/multi_gpu_scaling.py's checks on made-up environment rows (the benchmark itself runs on a GPU box)."""
import importlib.util
import subprocess
from pathlib import Path

import polars as pl
import yaml

from abstraction_cost import tables

from tests.fixtures.report_rows import environment_rows
from tests.fixtures.repository import REPO

spec = importlib.util.spec_from_file_location(
    "multi_gpu_scaling", REPO / "benchmarks/multi_gpu_scaling.py")
scaling = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scaling)


def jobs(spans):
    """Environment rows of timing jobs: (gpu index, start second, end second) each."""
    env = environment_rows([f"r{i}" for i in range(len(spans))])
    return scaling.timing_jobs(env.with_columns(
        gpu_index=pl.Series([g for g, _, _ in spans], dtype=pl.Int64),
        gpu_uuid=pl.Series([f"GPU-{g}" for g, _, _ in spans]),
        started_at=pl.Series([f"2026-01-01T00:00:{s:02d}.000+00:00" for _, s, _ in spans]),
        ended_at=pl.Series([f"2026-01-01T00:00:{e:02d}.500+00:00" for _, _, e in spans])))


def test_jobs_on_different_gpus_at_once_do_not_overlap():
    assert scaling.overlaps_on_one_gpu(jobs([(0, 0, 9), (1, 0, 9), (0, 10, 19), (1, 12, 19)])) == []


def test_two_jobs_at_once_on_one_gpu_are_found():
    found = scaling.overlaps_on_one_gpu(jobs([(0, 0, 9), (1, 0, 9), (1, 5, 12)]))
    assert found == [("train_eager[run=r1]", "train_eager[run=r2]")]


def test_rows_by_status_count_whole_tables_only(tmp_path):
    results = tmp_path / "results"
    (results / "study_a/train/eager").mkdir(parents=True)
    table = pl.DataFrame({"run_id": ["a", "b", "c"], "status": ["ok", "ok", "not_run"]})
    table.write_parquet(results / "study_a/backend_eval.parquet")
    table.write_parquet(results / "study_a/train/eager/seed0.rows.parquet")  # a part of a whole table
    (results / "study_a/backends/eval").mkdir(parents=True)
    table.write_parquet(results / "study_a/backends/eval/fp32.profile.parquet")  # one numerics' part
    tables.frame("environment", []).write_parquet(results / "study_a/backend_eval.env.parquet")
    assert scaling.row_status(results) == {"ok": 2, "not_run": 1}


def test_summary_states_wall_times_speedup_and_gpus():
    one = {"config": "config/gpu-smoke.yaml", "gpus": 1, "wall_s": 400.0, "hostname": "box", "returncode": 0,
           "gpu_names": ["NVIDIA H200"], "jobs": jobs([(0, 0, 9), (0, 10, 19)]), "overlaps_on_one_gpu": [],
           "rows_by_status": {"ok": 10}, "native_in_run": True}
    two = {**one, "gpus": 2, "wall_s": 220.0, "jobs": jobs([(0, 0, 9), (1, 0, 9)])}
    text = scaling.summarise([two, one])
    assert "| 1 | 400.0 | 1.00 | GPU 0: 2 | 0 | ok 10 | -, -, - |" in text   # a run recorded without the host's speed
    assert "| 2 | 220.0 | 1.82 | GPU 0: 1, GPU 1: 1 | 0 | ok 10 | -, -, - |" in text
    assert "2 GPUs against 1: 1.82x (meets the 1.8x target)" in text
    assert "the C++ programs built inside the clock" in text and "as slow per dispatched op" not in text
    assert "misses the 1.8x target" in scaling.summarise([{**two, "wall_s": 240.0}, one])


def test_several_runs_per_gpu_count_give_each_speedup_their_median_and_how_many_met_the_target():
    """Runs 2, 1, 2 GPUs: the verdict is not whichever two-GPU run came last, but each run's speedup against the
    one-GPU median, the speedup of their median wall, and how many met 1.8x; a faster host is named too."""
    one = {"config": "c", "gpus": 1, "wall_s": 500.0, "hostname": "box", "returncode": 0, "gpu_names": [],
           "jobs": [], "overlaps_on_one_gpu": [], "rows_by_status": {"ok": 1}, "host": {"host_op_us": 2.6}}
    fast = {**one, "gpus": 2, "wall_s": 275.0, "host": {"host_op_us": 1.3}}
    slow = {**fast, "wall_s": 325.0, "host": {"host_op_us": 2.7}}
    text = scaling.summarise([fast, one, slow])
    assert "2 GPUs against 1: 1.82x, 1.54x, median 1.67x (misses the 1.8x target; 1 of 2 runs met it)." in text
    assert "| 2 | 275.0 | 1.82 |" in text and "| 2 | 325.0 | 1.54 |" in text
    assert "The host was 2.00x as fast per dispatched op in the 2-GPU run of 275.0 s (1.3 against 2.6 µs)" in text
    # two one-GPU runs: the speedups are against their median
    text = scaling.summarise([fast, one, {**one, "wall_s": 540.0}])
    assert "2 GPUs against 1 (the median of 2 runs, 520.0 s): 1.89x (meets the 1.8x target)." in text


def test_the_hosts_speed_is_stated_and_a_slower_host_named_beside_the_ratio():
    """Two runs' wall times compare only where their hosts ran alike: the host's speed per run (the timing jobs'
    probes at start and end, weighted by their jobs' durations), and a line where it differed."""
    env = environment_rows(["long", "short", "shorter"]).with_columns(
        started_at=pl.Series(["2026-01-01T00:00:00+00:00"] * 3),
        ended_at=pl.Series(["2026-01-01T00:01:40+00:00", "2026-01-01T00:00:30+00:00", "2026-01-01T00:00:20+00:00"]),
        host_op_us_start=pl.Series([1.4, 2.9, 2.9]), host_op_us_end=pl.Series([1.5, 3.0, None], dtype=pl.Float64),
        host_copy_gbps_start=pl.Series([40.0, 5.0, 5.0]), host_copy_gbps_end=pl.Series([50.0, 5.0, 5.0]))
    # the long job's host counts for 100 s, the short ones' for 50 (a plain median of the probes would say 2.9)
    assert scaling.host_speed(env) == {"host_op_us": 1.5, "host_copy_gbps": 40.0, "turn_host_op_us": None}
    # the turns' probes (a job without turns: null), each job's weighted by its whole duration
    turns = env.with_columns(turn_host_op_us=pl.Series([None, 1.3, 2.8], dtype=pl.Float64))
    assert scaling.host_speed(turns)["turn_host_op_us"] == 1.3   # 30 s of turns at 1.3 against 20 s at 2.8
    one = {"config": "c", "gpus": 1, "wall_s": 400.0, "hostname": "box", "returncode": 0, "gpu_names": [],
           "jobs": [], "overlaps_on_one_gpu": [], "rows_by_status": {"ok": 1}, "host": {"host_op_us": 1.5,
                                                                                          "host_copy_gbps": 48.0}}
    two = {**one, "gpus": 2, "wall_s": 300.0, "host": {"host_op_us": 2.9, "host_copy_gbps": 8.4}}
    text = scaling.summarise([one, two])
    assert "| 1 | 400.0 | 1.00 |  | 0 | ok 1 | 1.5, 48.0, - |" in text
    assert "The host was 1.93x as slow per dispatched op in the 2-GPU run of 300.0 s (2.9 against 1.5 µs)" in text
    assert "as slow per dispatched op" not in scaling.summarise([one, {**two, "host": {"host_op_us": 1.6}}])


def test_a_run_passes_every_config_file_in_order_and_the_gpu_slots_last(tmp_path, monkeypatch):
    """The default config without network is two files (config.yaml, overlays/offline.yaml): both reach Snakemake,
    merged in order, and gpus.slots comes last so that it joins a file's own gpus settings."""
    calls = []

    def snakemake(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 1, "", "stopped here")

    monkeypatch.setattr(scaling.subprocess, "run", snakemake)
    configs = [REPO / "config/config.yaml", REPO / "config/overlays/offline.yaml"]
    result = scaling.run(configs, 2, tmp_path / "w", "all", native_in_run=False)   # True would remove native/build
    files = calls[-1][calls[-1].index("--configfile") + 1:calls[-1].index("-s")]
    assert files[:2] == [str(c) for c in configs]
    assert yaml.safe_load(Path(files[2]).read_text()) == {"gpus": {"slots": 2}}
    assert result["returncode"] == 1 and result["config"] == " ".join(map(str, configs))


def test_the_packing_bound_keeps_the_runs_lead_and_tail_and_spreads_its_gpu_jobs():
    """A two-GPU run that started 5 s before its first GPU job and ended 3 s after its last, with 28.5 s of GPU
    timing jobs, 19 of them on GPU 0 (a CPU job beside them aside): 27.5 s; packed perfectly 5 + 28.5/2 + 3 =
    22.25 s, and with the one-GPU run's 19 s of jobs 5 + 9.5 + 3 = 17.5 s. A run recorded without its start has
    no bound."""
    one = {"config": "c", "gpus": 1, "wall_s": 35.0, "hostname": "box", "returncode": 0, "gpu_names": [],
           "jobs": jobs([(0, 0, 9), (0, 10, 19)]), "overlaps_on_one_gpu": [], "rows_by_status": {}}
    two_jobs = jobs([(0, 0, 9), (1, 0, 9), (0, 10, 19), (1, 12, 19)])
    two_jobs[-1] = {**two_jobs[-1], "device": "cpu"}   # beside the GPUs: not theirs to pack
    start = min(j["start"] for j in two_jobs) - 5
    two = {**one, "gpus": 2, "jobs": two_jobs, "started_at": start, "wall_s": 27.5}
    assert abs(scaling.packed(two) - 22.25) < 1e-6
    assert abs(scaling.packed(two, scaling.gpu_slot_s(one)) - 17.5) < 1e-6
    assert scaling.packed(one) is None
    text = scaling.summarise([one, two])
    assert "Packed perfectly, the 2-GPU run of 27.5 s would end at 22 s (1.57x) with its 28 s of GPU timing jobs, " \
           "and at 18 s (2.00x) were they the 1-GPU run's 19 s." in text
