"""The sweep's kernel table: kernels of a Chrome trace grouped by name, grid and block; a job without a GPU."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.fixtures.repository import REPO

from tests.fixtures.sweep_fakes import pool_dir, process_numerics  # noqa: F401 (fixtures)


def test_kernels_from_a_chrome_trace_grouped_by_name_grid_block():
    from abstraction_cost.study_a.sweep.kernels import kernels_from_trace
    trace = {"traceEvents": [
        {"cat": "kernel", "name": "relu", "dur": 4.0, "args": {"grid": [1024, 2, 1], "block": [128, 1, 1]}},
        {"cat": "kernel", "name": "relu", "dur": 6.0, "args": {"grid": [1024, 2, 1], "block": [128, 1, 1]}},
        {"cat": "kernel", "name": "conv", "dur": 30.0, "args": {"grid": [8, 1, 1], "block": [256, 1, 1]}},
        {"cat": "cpu_op", "name": "aten::relu", "dur": 99.0}]}
    rows = kernels_from_trace(trace, top=5)
    assert [(r["rank"], r["kernel"], r["calls"], r["grid"]) for r in rows] == [(1, "conv", 1, "(8,1,1)"),
                                                                            (2, "relu", 2, "(1024,2,1)")]
    assert rows[1]["mean_us"] == 5.0 and rows[1]["share"] == pytest.approx(0.25)
    # below the top ones only ReLU kernels stay, with their rank
    assert [(r["rank"], r["kernel"]) for r in kernels_from_trace(trace, top=1)] == [(1, "conv"), (2, "relu")]
    trace["traceEvents"][2]["dur"] = 1.0
    assert [(r["rank"], r["kernel"]) for r in kernels_from_trace(trace, top=1)] == [(1, "relu")]


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
