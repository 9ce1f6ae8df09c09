"""The report's figures, tables and sentences of the derived tables, and Study B's per-block intervals."""
from __future__ import annotations

import polars as pl

from abstraction_cost.derived import breakeven, oracle_curve, precision, predictor
from abstraction_cost.report import derived as dr
from abstraction_cost.report import study_b_models as sbm
from tests.fixtures.report_rows import comparison_rows, conv_speedup_rows, layer_summary_rows, sweep_rows


def test_breakeven_figure_table_and_sentence():
    rows = breakeven.breakeven_rows({"backend_comparison": comparison_rows()})
    chart = dr.breakeven_figure(rows).to_dict()
    assert chart["spec"]["layer"][0]["encoding"]["x2"]["field"] == "breakeven_calls_high"   # the range drawn
    shown = dr.breakeven_display(rows).row(0, named=True)
    assert shown["speedup [95% CI]"] == "2.00× [1.80–2.20]" and shown["range"] == "[92–112]"
    assert "1 of 1 builds are measurably faster" in dr.breakeven_finding(rows)
    never = breakeven.breakeven_rows({"backend_comparison": comparison_rows(low=0.95)})
    assert dr.breakeven_figure(never) is None
    assert "1 show no measurable difference from eager at this precision" in dr.breakeven_finding(never)
    slower = breakeven.breakeven_rows({"backend_comparison": comparison_rows(speedup=0.5, low=0.4, high=0.6)})
    assert "1 are measurably slower than eager and never pay for it." in dr.breakeven_finding(slower)


def test_precision_sentence_says_what_one_process_intervals_leave_out():
    rows = precision.precision_rows({"sweep": sweep_rows().with_columns(repeats=pl.lit(5)),
                                     "backend_comparison": comparison_rows(low=0.9)})
    text = dr.precision_finding(rows)
    assert "In backend_comparison, sweep every row was measured in one process" in text
    assert "backend_comparison 1 of 2" in text
    shown = dr.precision_display(rows)
    assert shown.filter(pl.col("experiment") == "sweep")["timed calls"].to_list() == ["5"]
    assert "Not measured" in dr.precision_finding(rows.clear())


def test_predictor_sentence_against_the_study_and_the_mean():
    _, summary = predictor.predictor_rows(conv_speedup_rows([1.2] * 6))
    text = dr.predictor_finding(summary)
    assert "100% of held-out predictions within 5%, which reaches the study's 95%" in text
    assert "no better than predicting the other convolutions' mean (100%)" in text
    rows, summary = predictor.predictor_rows(conv_speedup_rows())
    assert dr.predictor_figure(rows) is not None and "falls short of" in dr.predictor_finding(summary)
    _, too_few = predictor.predictor_rows(conv_speedup_rows([1.0, 1.1]))
    assert "Not measured" in dr.predictor_finding(too_few)


def test_oracle_curve_figure_draws_four_lines_per_setting():
    chart = dr.oracle_curve_figure(oracle_curve.oracle_curve_rows(layer_summary_rows())).to_dict()
    values = chart["datasets"][chart["data"]["name"]]
    assert {v["line"] for v in values} == {"eager", "compiled", "oracle", "dp"}
    assert dr.oracle_curve_figure(oracle_curve.oracle_curve_rows(layer_summary_rows().clear())) is None


def test_per_block_figure_draws_each_blocks_interval():
    chart = sbm.configurations_figure(layer_summary_rows()).to_dict()
    rule = chart["spec"]["layer"][0]
    assert rule["mark"]["type"] == "rule" and rule["encoding"]["y2"]["field"] == "high"
    values = chart["datasets"][chart["data"]["name"]]
    eager = [v for v in values if v["configuration"] == "cuda" and v["block"] == 1][0]
    assert eager["low"] == 3.0 * 0.9 and eager["high"] == 3.0 * 1.1


def test_backend_sentence_reads_the_charts_speedups_and_flips():
    from abstraction_cost.report import study_a_backends as sab

    text = sab.time_finding(comparison_rows())
    assert text.endswith("fp32: does not hold (torchscript-python 2.00× [1.80–2.20], libtorch 1.10× [1.05–1.15]).")
    faster = comparison_rows(speedup=8.0, low=6.0, high=10.0).with_columns(
        speedup_vs_eager=pl.when(pl.col("implementation") == "libtorch").then(6.0)
        .otherwise(pl.col("speedup_vs_eager")),
        speedup_vs_eager_low=pl.when(pl.col("implementation") == "libtorch").then(5.5)
        .otherwise(pl.col("speedup_vs_eager_low")),
        speedup_vs_eager_high=pl.when(pl.col("implementation") == "libtorch").then(6.5)
        .otherwise(pl.col("speedup_vs_eager_high")))
    assert "fp32: holds (" in sab.time_finding(faster)
    assert "fp32: no measurable difference at this precision (" in sab.time_finding(comparison_rows(low=0.9).filter(
        pl.col("implementation") != "libtorch"))
    assert "Not measured" in sab.time_finding(comparison_rows().filter(pl.col("implementation") == "eager"))
