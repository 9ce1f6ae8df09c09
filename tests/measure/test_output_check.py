"""Correct before fast, on the CPU: the output check's verdicts, and a deliberately wrong compiled variant
(a torch.compile backend that adds 1 to every output) recorded as `wrong_output`, never timed nor a speedup, in
Study B's vision job (end to end, per-layer units, selective) and building blocks."""
import functools
import logging

import polars as pl
import pytest
import torch

from abstraction_cost import tables
from abstraction_cost.measure import output_check
from abstraction_cost.measure import numerics as nx
from abstraction_cost.measure.run import measured_run
from abstraction_cost.study_b.blocks import cases
from abstraction_cost.study_b.blocks.speedups import Bootstrap, compare
from abstraction_cost.study_b.models import (selective, job as vision_job, protocol as vision_protocol,
                                             summary as vision_summary)
from abstraction_cost.study_b.models import vision as vm

from tests.study_b.models.test_models import _with_id, smoke_config


def wrong_backend(gm, example_inputs):
    """Dynamo backend whose graphs compute their output plus one: a compiler bug on purpose."""
    def run(*args):
        out = gm(*args)
        return type(out)(o + 1 for o in out) if isinstance(out, (tuple, list)) else out + 1
    return run


def test_check_output_verdicts():
    ref = torch.randn(4, 10, dtype=torch.float64).float()
    assert nx.check_output(ref, ref.clone(), "fp32").ok
    off = nx.check_output(ref, ref + 1, "fp32")
    assert not off.ok and off.max_abs_diff == pytest.approx(1.0) and "fp32" in off.message
    assert not nx.check_output(ref, ref[:2], "fp32").ok                       # shapes
    nan = ref.clone()
    nan[0, 0] = float("nan")
    assert "non-finite" in nx.check_output(ref, nan, "fp32").message
    assert nx.check_output((ref, {"a": ref}), (ref, {"a": ref}), "tf32").ok  # nested outputs
    # TF32-sized error: too large for fp32, within tf32's tolerance
    small = ref * (1 + 5e-3)
    assert not nx.check_output(ref, small, "fp32").ok and nx.check_output(ref, small, "tf32").ok
    # bf16: cosine similarity, so a scaled-by-2% output passes, a permuted one does not
    assert nx.check_output(ref, ref * 1.02, "bf16-autocast").ok
    assert not nx.check_output(ref, ref.flip(0), "bf16-autocast").ok
    with pytest.raises(ValueError, match="numerics"):
        nx.tolerance("fp16")


def test_float64_reference_passes_a_candidate_no_worse_than_eager():
    exact = torch.linspace(-1, 1, 100, dtype=torch.float64)
    eager = (exact + 0.01).float()           # eager itself is off by 0.01
    candidate = (exact - 0.01).float()       # as far off, the other way: beyond the direct tolerance
    assert not nx.check_output(eager, candidate, "fp32").ok
    passed = nx.check_output(eager, candidate, "fp32", lambda: exact)
    assert passed.ok and "float64" in passed.message
    assert not nx.check_output(eager, (exact + 0.5).float(), "fp32", lambda: exact).ok


def test_reference_of_a_module_builds_its_float64_copy_only_when_needed():
    model = torch.nn.Linear(8, 4)
    x = torch.randn(3, 8)
    ref = output_check.reference(model, (x,), "fp32", torch.device("cpu"))
    assert ref.require(model, (x,), "same").ok and ref._fp64_out == []
    with pytest.raises(output_check.WrongOutput, match="wrong one"):
        ref.require(lambda x: model(x) + 1, (x,), "wrong one")
    assert ref._fp64_out[0].dtype == torch.float64


def test_applied_restores_the_flags():
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with nx.applied("tf32"):
        assert nx.current() == "tf32" and torch.get_float32_matmul_precision() == "high"
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before


def test_a_wrong_compiled_model_is_wrong_output_in_every_step(tmp_path, monkeypatch):
    monkeypatch.setattr(vm, "BACKEND", wrong_backend)
    config = smoke_config()
    with measured_run(config, rule="t", job={}, env_path=tmp_path / "env.parquet") as run:
        out = vision_job.run_job(config, "squeezenet1_1", "cpu", run, logging.getLogger("t"))
    e2e = tables.frame("vision_e2e", _with_id(out["vision_e2e"]))
    compiled = e2e.filter(pl.col("variant") == "compiled")
    assert compiled["status"].to_list() == ["wrong_output"] and compiled["time_ms"].is_null().all()
    assert "output differs from eager's" in compiled["message"][0]
    assert set(e2e.filter(pl.col("variant").is_in(["eager", "eager_channels_last"]))["status"]) == {"ok"}
    speedups = tables.frame("vision_speedups", vision_summary.speedup_rows(e2e, 50, 0.95, 0))
    row = speedups.filter(pl.col("variant") == "compiled").row(0, named=True)
    assert row["status"] == "wrong_output" and row["speedup"] is None
    built = {b["variant"]: b for b in out["vision_builds"] if b["step"] == "e2e"}
    assert built["compiled"]["status"] == "wrong_output" and built["compiled"]["graphs"] >= 1
    # the blocks compiled alone are checked too: no layer time, no timing-method time, and so no oracle
    # choice for selective compilation to build
    for name in ("vision_layer_times", "vision_timing_methods"):
        statuses = {r["status"] for r in out[name]}
        assert statuses == {"wrong_output"}, (name, statuses)
    assert all(r["choice"] is None for r in out["vision_oracles"])
    by_variant = {}
    for r in out["vision_selective"]:
        by_variant.setdefault(r["variant"], set()).add(r["status"])
    assert all(by_variant[v] == {"missing"} for v in selective.VARIANTS)
    assert by_variant["compiled"] == {"wrong_output"} and by_variant["eager"] == {"ok"}


def test_a_wrong_building_block_is_wrong_output_not_a_speedup(monkeypatch):
    monkeypatch.setattr(cases, "prepare", functools.partial(cases.prepare, backend=wrong_backend))
    settings = cases.TimingSettings(warmup=1, rounds=2, repeats_per_round=1, flush_l2=False, rotating_inputs=1,
                                    rotate_max_mib=1, device_setting="cpu")
    conv = torch.nn.Conv2d(3, 4, 3)

    def build(device):
        return conv.to(device), [(torch.randn(1, 3, 8, 8, device=device),)]

    rows = cases.time_case(build, "cpu", "default", torch.device("cpu"), settings, {"n": 1}, "conv")
    assert {r["status"] for r in rows} == {"wrong_output"} and all(r["time_ms"] is None for r in rows)
    df = pl.DataFrame(rows)
    result = compare(df.filter(~pl.col("compiled")), df.filter(pl.col("compiled")), Bootstrap(50, 0.95, 0))
    assert result["status"] == "wrong_output" and result["speedup"] is None


def test_batch_numerics_and_memory_format_are_labelled_axes_of_the_vision_job(tmp_path, monkeypatch):
    monkeypatch.setattr(vm, "BACKEND", "eager")
    config = smoke_config(batch_size={"cpu": [2, 1], "gpu": [1]}, numerics=["fp32", "bf16-autocast"],
                          memory_formats=["channels_last"])
    config["study_b"]["models"]["baselines"] = []
    every = vm.settings(config, "cpu")
    assert len(every) == 4 and every[0] == vm.Setting(2, "fp32", "channels_last")
    with measured_run(config, rule="t", job={}, env_path=tmp_path / "env.parquet") as run:
        out = vision_job.run_job(config, "squeezenet1_1", "cpu", run, logging.getLogger("t"))
    axes = ["batch_size", "numerics", "memory_format"]
    e2e = tables.frame("vision_e2e", _with_id(out["vision_e2e"]))
    assert set(e2e["status"]) == {"ok"}, e2e.filter(pl.col("status") != "ok")["message"].to_list()
    assert e2e.select(axes).unique().height == 4
    assert set(e2e["memory_format"]) == {"channels_last"}
    for name in ("vision_layer_times", "vision_oracles", "vision_selective"):
        df = tables.frame(name, _with_id(out[name]))
        assert df.select(axes).unique().height == 4, name
    # the timing methods too, the study's setting first (its compiled model is the one its steps built)
    methods = tables.frame("vision_timing_methods", _with_id(out["vision_timing_methods"]))
    assert set(methods["status"]) == {"ok"} and methods.select(axes).unique(maintain_order=True).height == 4
    assert methods.row(0, named=True)["batch_size"] == 2 and methods["device_ms"].is_null().all()   # CPU
    # every setting is its own speedup row, against the eager of its own setting
    speedups = tables.frame("vision_speedups", vision_summary.speedup_rows(e2e, 50, 0.95, 0))
    assert speedups.height == 4 * 2 and set(speedups["status"]) == {"ok"}   # compiled and eager_in_process
    speedups = speedups.filter(pl.col("variant") == "compiled")
    # the report tells the settings apart wherever it shows pair
    from abstraction_cost.report import study_b_models as sbm
    builds = tables.frame("vision_builds", _with_id(out["vision_builds"]))
    display = sbm.e2e_display(speedups, builds)
    assert display["pair"].n_unique() == 4 and "cpu · batch 2 · bf16-autocast · channels_last" in display["pair"]
    assert display["first call (s, compile)"].null_count() == 0      # joined with its own setting's build row
    oracles = tables.frame("vision_oracles", out["vision_oracles"])
    assert sbm.oracles_display(oracles)["pair"].n_unique() == 4
    assert sbm.e2e_figure(speedups) is not None
    # one eager baseline per step and setting, each against the e2e step's
    baselines = tables.frame("vision_eager_baselines", vision_summary.eager_baseline_rows(
        {n: tables.frame(n, _with_id(out[n])) for n in ("vision_e2e", "vision_layer_times", "vision_selective",
                                                        "vision_timing_methods")}, 50, 0.95, 0))
    assert baselines.height == 4 * 5 and set(baselines["step"]) == {
        "e2e default", "e2e in-process default", "layers", "selective", "timing_sync"}
    assert (baselines["ratio_to_e2e_low"] <= baselines["ratio_to_e2e_high"]).all()
    assert sbm.eager_baselines_display(baselines).height == 20
    selective_summary = tables.frame("vision_selective_summary", vision_summary.selective_summary_rows(
        tables.frame("vision_selective", _with_id(out["vision_selective"])), oracles, 50, 0.95, 0))
    dp = selective_summary.filter(pl.col("variant") == "dp_blocks").row(0, named=True)
    assert dp["prediction_error"] == pytest.approx(dp["time_ms"] / dp["predicted_ms"])
    assert dp["prediction_error_low"] <= dp["prediction_error"] <= dp["prediction_error_high"]
    assert sbm.selective_display(selective_summary).height == selective_summary.height


def test_axes_name_the_config_key_at_fault():
    with pytest.raises(ValueError, match=r"study_b\.models\.numerics"):
        vm.settings(smoke_config(numerics=["fp16"]), "cpu")
    with pytest.raises(ValueError, match=r"study_b\.models\.memory_formats"):
        vm.settings(smoke_config(memory_formats=["nhwc"]), "cpu")
    assert vm.batch_sizes(smoke_config(batch_size=[1, 32]), "gpu") == [1, 32]


def test_the_report_says_which_numerics_every_table_was_measured_in():
    from abstraction_cost.report.numerics import numerics_by_table
    env = pl.DataFrame({"run_id": ["a", "b", "c"], "device": ["cuda", "cuda", "cpu"],
                        "tf32_cudnn": [False, True, True], "tf32_matmul": [False, True, True]})
    frames = {"vision_e2e": pl.DataFrame({"run_id": ["a", "a"], "numerics": ["tf32", "fp32"],
                                          "status": ["ok", "ok"]}),
              "study_b_matmul": pl.DataFrame({"run_id": ["a", "b", "c"], "status": ["ok", "ok", "ok"]}),
              "speedups": pl.DataFrame({"run_id": ["a,c"], "status": ["ok"]}),
              "failed": pl.DataFrame({"run_id": ["b"], "status": ["error"]}), "environment": env}
    out = {r["table"]: r["numerics"] for r in numerics_by_table(frames, env).iter_rows(named=True)}
    assert out == {"vision_e2e": "fp32, tf32", "study_b_matmul": "fp32, tf32", "speedups": "fp32"}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_inductor_on_the_gpu_passes_the_output_check_in_every_numerics_and_memory_format(tmp_path):
    """No false alarm: Inductor's real kernels are within each numerics' tolerance of eager's."""
    config = smoke_config(models={"gpu": ["squeezenet1_1"]}, numerics=["fp32", "tf32", "bf16-autocast"],
                          memory_formats=["contiguous", "channels_last"], batch_size=[4])
    config["device"] = "cuda"
    config["study_b"]["models"]["protocol"] = dict(invocations=1, max_invocations=1, blocks=2, block_ms=5.0,
                                                   min_calls=2, warmup_max=6)
    rows = []
    for setting in vm.settings(config, "gpu"):   # each variant built and checked in its worker, then timed
        records = vision_protocol.measure(config, "squeezenet1_1", "gpu", setting, None, None, "")
        rows += vision_protocol.rows(config, "squeezenet1_1", "gpu", setting, records, None, 14)["vision_e2e"]
    e2e = tables.frame("vision_e2e", _with_id(rows))
    assert set(e2e["status"]) == {"ok"}, e2e.filter(pl.col("status") != "ok")["message"].unique().to_list()
    assert e2e.select("numerics", "memory_format").unique().height == 6
