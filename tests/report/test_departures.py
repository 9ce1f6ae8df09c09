"""The sentence beside a study's number that says where this pipeline's method departs from the study's."""
from __future__ import annotations

import polars as pl

from abstraction_cost import tables
from abstraction_cost.report import departures
from tests.fixtures.report_rows import environment_rows


def _speedups(batches=(1, 32), numerics="fp32", samples=20) -> pl.DataFrame:
    defaults = dict.fromkeys(tables.schema("vision_speedups"))
    return tables.frame("vision_speedups", [
        {**defaults, "run_id": f"job-{b}", "model": "resnet50", "pair": "gpu", "configuration": "triton",
         "mode": "default", "batch_size": b, "resolution": 224, "numerics": numerics, "memory_format": "contiguous",
         "variant": "compiled", "speedup": 1.5, "samples": samples, "status": "ok"} for b in batches])


def test_generation_from_the_gpus_name():
    assert departures.generation("NVIDIA H100 80GB HBM3") == "Hopper"
    assert departures.generation("Tesla V100-SXM2-16GB") == "Volta"
    assert departures.generation("NVIDIA A100-SXM4-40GB") == "Ampere"
    assert departures.generation("NVIDIA L4") == "Ada"
    assert departures.generation("Some accelerator") is None and departures.generation(None) is None


def test_study_b_end_to_end_names_every_departure():
    env = environment_rows(["job-1", "job-32"])
    text = departures.departures("study_b_e2e", _speedups(), env, profiled=False, shapes="static (dynamic=False)")
    differ, same = text.split(". The same: ")
    assert "timing: unprofiled here, inside the profiler in the study" in differ
    assert "GPU: NVIDIA H100 80GB HBM3 (Hopper) here, V100 (Volta), PyTorch 2.3 in the study" in differ
    assert "statistic: median over 20 timed calls in one process here, median of 20 runs" in differ
    assert "batch: 1, 32 here, not stated in the study" in differ
    assert "numerics fp32" in same and "shapes static (dynamic=False)" in same


def test_departures_follow_the_table():
    env = environment_rows(["job-1"])
    text = departures.departures("study_b_e2e", _speedups(batches=(1,), numerics="tf32"), env, profiled=True)
    assert "numerics: tf32 here, fp32 in the study" in text and "timing inside the profiler" in text.split(
        "The same: ")[1]
    # the sweep's coming invocations column is counted where it is there; a build column tells the shapes
    defaults = dict.fromkeys(tables.schema("sweep"))
    sweep = tables.frame("sweep", [{**defaults, "run_id": "job-1", "implementation": i, "numerics": "fp32",
                                    "batch_size": 8, "resolution": 64, "status": "ok", "repeats": 10, "build": b}
                                   for i, b in (("eager", "none"), ("compiled-default", "dynamic"),
                                                ("eager-cudagraphs", "per-shape"))])
    text = departures.departures("study_a_sweep", sweep.with_columns(invocations=pl.lit(3)), env, profiled=False)
    assert "median over 10 timed calls in 3 process invocations here" in text
    # a per-shape build is static (on the H100, R1, it read "static, except dynamic, per-shape builds")
    assert "shapes: static, except the dynamic-shape builds of compiled-default here" in text
    static = sweep.filter(pl.col("build") != "dynamic")
    assert "shapes static" in departures.departures("study_a_sweep", static, env, profiled=False).split(
        "The same: ")[1]
    cpu = env.with_columns(device=pl.lit("cpu"), gpu_name=pl.lit(None, pl.String), gpu_uuid=pl.lit(None, pl.String))
    assert "GPU: the CPU (no GPU) here" in departures.departures("study_a_sweep", sweep, cpu, profiled=False)


def test_the_training_statistic_states_its_repeats_against_the_studys_ten():
    summary = tables.frame("training_summary", [{**dict.fromkeys(tables.schema("training_summary")),
                                                 "run_id": "job-1", "repeats_ok": n} for n in (1, 1)])
    text = departures.departures("study_a_training", summary, environment_rows(["job-1"]), profiled=False,
                                 statistic=departures.training_statistic(summary))
    assert "statistic: 1 repeat; the first epoch apart from the median of the later ones" in text
    assert "mean epoch time, 10 repeats in the study" in text
    three = summary.with_columns(repeats_ok=pl.Series([3, 10]))
    assert departures.training_statistic(three).startswith("3–10 repeats;")
