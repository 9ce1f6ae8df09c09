"""The sweep's kernel table: kernels of a Chrome trace grouped by name, grid and block; a job without a GPU."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.fixtures.repository import REPO

from tests.fixtures.sweep_fakes import pool_dir, process_numerics  # noqa: F401 (fixtures)


def _kernel(name, ts, dur, grid=(8, 1, 1), block=(256, 1, 1)):
    return {"cat": "kernel", "name": name, "ph": "X", "ts": ts, "dur": dur,
            "args": {"grid": list(grid), "block": list(block)}}


def test_kernels_from_a_chrome_trace_grouped_by_name_grid_block_per_forward():
    from abstraction_cost.study_a.sweep.kernels import kernels_from_trace
    trace = {"traceEvents": [
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ph": "X", "ts": 0.0, "dur": 1.0},
        _kernel("relu", 10.0, 4.0, (1024, 2, 1), (128, 1, 1)), _kernel("relu", 20.0, 6.0, (1024, 2, 1), (128, 1, 1)),
        _kernel("conv", 30.0, 30.0), _kernel("conv", 70.0, 30.0),
        {"cat": "cpu_op", "name": "aten::relu", "ph": "X", "ts": 5.0, "dur": 99.0}]}
    rows = kernels_from_trace(trace, top=5, calls=2)   # two forwards profiled
    assert [(r["rank"], r["kernel"], r["calls"], r["grid"]) for r in rows] == [(1, "conv", 1, "(8,1,1)"),
                                                                            (2, "relu", 1, "(1024,2,1)")]
    assert rows[0]["total_us"] == 30.0 and rows[1]["mean_us"] == 5.0 and rows[1]["share"] == pytest.approx(10 / 70)
    # below the top ones only ReLU kernels stay, with their rank
    assert [(r["rank"], r["kernel"]) for r in kernels_from_trace(trace, top=1)] == [(1, "conv"), (2, "relu")]
    trace["traceEvents"][3]["dur"] = trace["traceEvents"][4]["dur"] = 1.0
    assert [(r["rank"], r["kernel"]) for r in kernels_from_trace(trace, top=1)] == [(1, "relu")]


def test_kernel_groups_read_kineto_lists_and_ac_cudnn_axes_and_only_the_profiled_window():
    from abstraction_cost.measure.profiled import kernel_groups
    cupti = {"cat": "kernel", "name": "k", "ph": "X", "ts": 12.0, "dur": 2.0,
             "args": {"grid x": 4, "grid y": 2, "grid z": 1, "block x": 64, "block y": 1, "block z": 1}}
    stale = {**_kernel("old", 9e12, 5.0)}  # a record in another clock's domain (profiled._in_window)
    events = [{"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ph": "X", "ts": 10.0, "dur": 1.0},
              _kernel("conv", 11.0, 3.0), cupti, {**cupti, "ts": 15.0}, stale]
    assert kernel_groups(events) == [["conv", "(8,1,1)", "(256,1,1)", 1, 3.0], ["k", "(4,2,1)", "(64,1,1)", 2, 4.0]]


def test_the_kernel_rows_of_a_sweep_record_or_why_it_has_none():
    from abstraction_cost.study_a.sweep.kernels import from_profile
    groups = [["conv", "(8,1,1)", "(256,1,1)", 10, 50.0], ["relu", "(4,1,1)", "(128,1,1)", 5, 10.0]]
    profile = {"status": "ok", "profiled_calls": 5, "device_source": "ac_cudnn CUPTI", "kernel_groups": groups}
    source, rows = from_profile({"status": "ok", "profile": profile})
    assert source == "ac_cudnn CUPTI"
    assert [(r["kernel"], r["calls"], r["total_us"], r["mean_us"]) for r in rows] == [("conv", 2, 10.0, 5.0),
                                                                                     ("relu", 1, 2.0, 2.0)]
    assert rows[0]["message"].startswith("the sweep's profiled pass of this cell: 5 calls")
    assert from_profile(None)[1][0]["status"] == "not_run"
    assert from_profile({"status": "oom", "message": "CUDA out of memory"})[1] == [
        {"status": "oom", "message": "the kernel point's cell: CUDA out of memory"}]
    assert from_profile({"status": "ok"})[1][0]["message"] == "the kernel point has no profiled pass"
    assert from_profile({"status": "ok", "profile": {"status": "error", "message": "died"}})[1] == [
        {"status": "error", "message": "died"}]
    refused = {"status": "ok", "profiled_calls": 5, "device_message": "CUPTI refused"}
    assert from_profile({"status": "ok", "profile": refused})[1] == [{"status": "not_run",
                                                                         "message": "CUPTI refused"}]


def test_the_kernel_table_is_read_from_the_sweep_where_its_point_is_a_cell_of_the_grid():
    from abstraction_cost import config as config_module
    from abstraction_cost.study_a.sweep.cells import SweepSettings
    from abstraction_cost.study_a.sweep.kernel_point import point_cell, read_from_sweep
    for name in ("gpu-smoke", "smoke", "config", "paper"):
        settings = SweepSettings.from_config(config_module.load(REPO / f"config/{name}.yaml"))
        assert read_from_sweep(settings, 5) and point_cell(settings, settings.cells()) is not None, name
    off_grid = config_module.load(REPO / "config/gpu-smoke.yaml")
    off_grid["study_a"]["sweep"]["batches"] = [8, 64]   # the point's batch 32 is no cell: kernel jobs of its own
    settings = SweepSettings.from_config(off_grid)
    assert not read_from_sweep(settings, 5) and point_cell(settings, settings.cells()) is None
    settings = SweepSettings.from_config(config_module.load(REPO / "config/gpu-smoke.yaml"))
    point = point_cell(settings, settings.cells())
    assert (point.batch, point.resolution, point.transfer) == (32, 256, "float32-pageable")
    assert not read_from_sweep(settings, 0)  # no profiled pass


def test_kernel_job_without_a_gpu_is_one_not_run_row(pool_dir, tmp_path, process_numerics):
    from abstraction_cost import config as config_module, tables
    from abstraction_cost.study_a.sweep import kernels as sweep_kernels
    config = config_module.load(REPO / "config/smoke.yaml")
    out = SimpleNamespace(table=str(tmp_path / "k.parquet"), env=str(tmp_path / "k.env.parquet"))
    sweep_kernels.run(SimpleNamespace(config=config, input=SimpleNamespace(inputs=str(pool_dir)), output=out,
                                      rule="sweep_kernels_job",
                                      wildcards=SimpleNamespace(implementation="eager", numerics="tf32")))
    df = tables.read("sweep_kernels", out.table)
    assert df["status"].to_list() == ["not_run"] and "no CUDA GPU" in df["message"][0]
    assert df["numerics"].to_list() == ["tf32"]
    assert tables.read("environment", out.env)["tf32_cudnn"].to_list() == [True]
