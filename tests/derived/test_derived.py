"""The derived tables the report draws (src/abstraction_cost/derived/) on small tables with known answers."""
from __future__ import annotations

import polars as pl
import pytest
import torch

from abstraction_cost import tables
from abstraction_cost.derived import breakeven, energy, flops, oracle_curve, precision, predictor
from tests.fixtures.report_rows import comparison_rows, conv_speedup_rows, sweep_rows as _sweep


def _rows(table: str, rows: list[dict]) -> pl.DataFrame:
    defaults = dict.fromkeys(tables.schema(table))
    status = {"status": "ok"} if "status" in defaults else {}
    return tables.frame(table, [{**defaults, "run_id": "r", **status, **r} for r in rows])


def test_breakeven_is_the_build_over_the_saving_with_the_intervals_range():
    row = breakeven.breakeven_rows({"backend_comparison": comparison_rows()}).row(0, named=True)
    assert row["implementation"] == "torchscript-python" and row["build_source"] == "prepare_s"
    assert row["breakeven_calls"] == pytest.approx(1600 / 16)              # 32 ms → 16 ms a call
    assert row["breakeven_calls_low"] == pytest.approx(1600 / (32 * (1 - 1 / 2.2)))
    assert row["breakeven_calls_high"] == pytest.approx(1600 / (32 * (1 - 1 / 1.8)))
    assert breakeven.breakeven_rows({"backend_comparison": comparison_rows()}).height == 1


def test_a_build_not_measurably_faster_never_breaks_even():
    for low in (0.9, None):
        row = breakeven.breakeven_rows({"backend_comparison": comparison_rows(low=low)}).row(0, named=True)
        assert row["breakeven_calls"] is None and row["message"] == breakeven.NOT_FASTER
    slower = breakeven.breakeven_rows({"backend_comparison": comparison_rows(speedup=0.5, low=0.4, high=0.6)})
    assert slower.row(0, named=True)["message"] == breakeven.SLOWER


def test_breakeven_of_the_sweeps_builds_per_cell():
    sweep = _sweep(eager_factor=(2.0, 2.0)).with_columns(
        implementation=pl.when(pl.col("implementation") == "libtorch").then(pl.lit("compiled-default"))
        .otherwise(pl.col("implementation")),
        build_s=pl.when((pl.col("implementation") == "libtorch") & (pl.col("transfer") == "float32-pageable"))
        .then(3.0), time_ms_low=pl.col("time_ms") * 0.98, time_ms_high=pl.col("time_ms") * 1.02)
    rows = breakeven.breakeven_rows({"sweep": sweep})
    assert set(rows["implementation"]) == {"compiled-default"} and set(rows["build_s"]) == {3.0}
    cell = rows.filter((pl.col("batch_size") == 8) & (pl.col("resolution") == 32)).row(0, named=True)
    # eager 2× slower: a call saves half of eager's time per batch
    assert cell["breakeven_calls"] == pytest.approx(3000 / (0.2 * 8 / 2))
    # the case names its cell, as the backend comparison's does: the finding lists cases of one build side by side
    assert cell["case"] == "batch 8, 32 px, float32-pageable, build None"


def test_a_dynamic_builds_compile_is_its_cost_at_every_shape_a_per_shape_builds_its_own():
    # compiled-default at 8 × 32 px compiles (10 s); at the other shapes it only recompiles (10 ms): on the H100
    # (R1) the recompile alone made a dynamic build "pay for itself after 11 calls"
    sweep = _sweep(eager_factor=(2.0, 2.0)).with_columns(
        implementation=pl.when(pl.col("implementation") == "libtorch").then(pl.lit("compiled-default"))
        .otherwise(pl.col("implementation")),
        build_s=pl.when(pl.col("implementation") != "libtorch").then(None)
        .when((pl.col("batch_size") == 8) & (pl.col("resolution") == 32)).then(10.0).otherwise(0.01),
        time_ms_low=pl.col("time_ms") * 0.98, time_ms_high=pl.col("time_ms") * 1.02)
    dynamic = breakeven.breakeven_rows({"sweep": sweep.with_columns(build=pl.lit("dynamic"))})
    assert set(dynamic["build_s"]) == {10.0}
    per_shape = breakeven.breakeven_rows({"sweep": sweep.with_columns(build=pl.lit("per-shape"))})
    assert set(per_shape["build_s"]) == {10.0, 0.01}


def test_energy_per_sample_is_power_times_time_and_a_phase_without_samples_has_none():
    sweep = _sweep().with_columns(power_w_mean=pl.lit(300.0), nvml_samples=pl.when(pl.col("resolution") == 32)
                                  .then(0).otherwise(5))
    rows = energy.energy_rows(sweep, comparison_rows().clear(), pl.DataFrame(schema=tables.schema("backend_eval")))
    sampled = rows.filter(pl.col("status") == "ok")
    assert sampled["energy_per_sample_j"].to_list() == pytest.approx(
        (sampled["time_per_sample_ms"] * 0.3).to_list())
    unsampled = rows.filter(pl.col("resolution") == 32)
    assert set(unsampled["status"]) == {"missing"} and unsampled["energy_per_sample_j"].null_count() == unsampled.height
    evals = _rows("backend_eval", [{"implementation": "eager", "numerics": "fp32", "power_w_mean": 200.0,
                                    "nvml_samples": 4, "repeat": 0}])
    compared = energy.energy_rows(_sweep().clear(), comparison_rows(), evals)
    eager = compared.filter(pl.col("implementation") == "eager").row(0, named=True)
    assert eager["energy_per_sample_j"] == pytest.approx(0.2) and compared.height == 3


def test_precision_counts_widths_and_ratios_holding_one():
    frames = {"sweep": _sweep(spread=0.05).with_columns(repeats=pl.lit(10), warmup_calls=pl.lit(2)),
              "backend_comparison": comparison_rows(low=0.9)}
    rows = {(r["experiment"], r["quantity"]): r for r in precision.precision_rows(frames).iter_rows(named=True)}
    sweep = rows[("sweep", "time_per_sample_ms")]
    assert sweep["rel_width_median"] == pytest.approx(0.1) and sweep["timed_calls"] == "10"
    assert sweep["warmup_calls"] == "2" and sweep["invocations"] == "1" and sweep["rows"] == 30
    speedups = rows[("backend_comparison", "speedup_vs_eager")]
    assert speedups["includes_one"] == 1 and speedups["rows"] == 2
    assert ("vision_speedups", "speedup") not in rows        # not measured: no row
    # the coming invocations column is read where the table has it
    with_invocations = precision.precision_rows({"sweep": frames["sweep"].with_columns(invocations=pl.lit(3))})
    assert with_invocations["invocations"].to_list() == ["3"]


def test_drift_within_a_process_from_the_timed_calls_halves():
    calls = _rows("backend_eval", [{"implementation": "eager", "numerics": "bf16-autocast", "repeat": i,
                                    "time_per_sample_ms": 8.0 if i < 5 else 6.0} for i in range(10)])
    drift, what = precision.drift_spread(calls, ["implementation", "numerics"], "repeat", "time_per_sample_ms")
    assert drift == pytest.approx(0.25) and "later half" in what


def test_oracle_curve_accumulates_eager_compiled_and_the_best_of_each_block():
    layers = _rows("vision_layer_summary", [
        {"model": "m", "pair": "gpu", "mode": "default", "batch_size": 1, "numerics": "fp32",
         "memory_format": "contiguous", "method": "timer", "block": b, "block_name": f"b{b}", "eager_ms": e,
         "compiled_ms": c, "dp_compiled": d} for b, e, c, d in ((0, 1.0, 2.0, False), (1, 3.0, 1.0, True),
                                                                  (2, 1.0, 1.5, True))])
    curve = oracle_curve.oracle_curve_rows(layers)
    assert curve["eager_cum_ms"].to_list() == [1.0, 4.0, 5.0]
    assert curve["compiled_cum_ms"].to_list() == [2.0, 3.0, 4.5]
    assert curve["oracle_cum_ms"].to_list() == [1.0, 2.0, 3.0]
    assert curve["dp_cum_ms"].to_list() == [1.0, 2.0, 3.5]
    assert curve["oracle_speedup"][-1] == pytest.approx(5 / 3)
    unchosen = oracle_curve.oracle_curve_rows(layers.with_columns(dp_compiled=pl.lit(None, pl.Boolean)))
    assert unchosen["dp_cum_ms"].null_count() == 3


def test_predictor_is_scored_on_held_out_convolutions():
    rows, summary = predictor.predictor_rows(conv_speedup_rows([1.2] * 6))
    assert rows.height == 6 and set(rows["target"]) == {"isolated"}
    assert rows["predicted_speedup"].to_list() == pytest.approx([1.2] * 6, rel=0.05)
    ok = summary.filter(pl.col("target") == "isolated").row(0, named=True)
    assert ok["status"] == "ok" and ok["within_5pct"] == 1.0 and ok["study_within_5pct"] == 0.95
    assert ok["baseline_within_5pct"] == 1.0 and ok["convolutions"] == 6


def test_predictor_needs_enough_convolutions():
    _, summary = predictor.predictor_rows(conv_speedup_rows([1.0, 1.1, 0.9]))
    row = summary.row(0, named=True)
    assert row["status"] == "not_run" and "at least 4" in row["message"]


class _Item(torch.nn.Module):
    def forward(self, x):
        return x * x.sum().item()   # a value the meta device does not have


def test_flops_are_counted_on_the_meta_device_and_an_uncountable_forward_is_a_row_with_its_reason():
    conv = lambda: torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)  # noqa: E731
    ok, failed = flops.flops_rows([("study_a", "conv", conv, 3, 2, 5), ("study_b", "item", _Item, 3, 1, 5)], "r")
    assert ok["flops"] == 2 * 2 * 5 * 5 * 8 * 3 * 9 and ok["flops_per_sample"] == ok["flops"] / 2
    assert ok["status"] == "ok" and "2 per multiply-add" in ok["message"]
    assert failed["flops"] is None and failed["status"] == "error" and "could not count" in failed["message"]
    tables.frame("flops", [ok, failed])


def test_flops_of_study_a_resnet50_scale_with_the_batch():
    from abstraction_cost.models import resnet

    build = lambda: resnet.resnet50(3, 20)  # noqa: E731
    one, eight = flops.flops_rows([("study_a", "resnet50", build, 3, 1, 224),
                                   ("study_a", "resnet50", build, 3, 8, 224)], "r")
    assert 7.5e9 < one["flops"] < 8.5e9       # ResNet-50: about 4.1 G multiply-adds at 224 px
    assert eight["flops_per_sample"] == pytest.approx(one["flops"])


def test_precision_reads_the_interleaved_sweeps_invocations_and_spread():
    sweep = _sweep().with_columns(invocations=pl.lit(3), invocation_spread=pl.lit(1.08))
    row = precision.precision_rows({"sweep": sweep}).row(0, named=True)
    assert row["invocations"] == "3" and row["spread"] == pytest.approx(0.08)
    assert "slowest invocation" in row["spread_measure"]
    # the paired speedups come from the sweep's invocations: counted as the sweep counts them
    paired = _rows("sweep_speedups", [{"numerics": "fp32", "implementation": "libtorch", "speedup": 1.1,
                                       "speedup_low": 1.0, "speedup_high": 1.2, "paired_turns": 6}])
    rows = precision.precision_rows({"sweep": sweep, "sweep_speedups": paired})
    assert rows.filter(pl.col("experiment") == "sweep_speedups")["invocations"].to_list() == ["3"]


def test_flops_cases_cover_the_configs_sweep_backends_and_vision_models():
    from tests.study_b.models.test_models import smoke_config

    config = smoke_config()
    found = {(study, model, batch, resolution) for study, model, _, _, batch, resolution in flops.cases(config)}
    sweep = config["study_a"]["sweep"]
    assert {("study_a", "resnet50", b, r) for b in sweep["batches"] for r in sweep["resolutions"]} <= found
    backends = config["study_a"]["backends"]
    assert ("study_a", "resnet50", backends["batch_size"], backends["resolution"]) in found
    models = {m for ms in config["study_b"]["models"]["models"].values() for m in ms}
    assert {m for study, m, _, _ in found if study == "study_b"} == models   # squeezenet on both pairs: once
    assert len([f for f in found if f[1] == "squeezenet1_1"]) == 1
