"""The training summary's time per sample: the median over repeats (each a process of its own) of each repeat's
median, first epoch apart from the steady ones, with measure/statistics.hierarchical_interval's 95% interval."""
import numpy as np
import polars as pl
import pytest

from abstraction_cost import tables
from abstraction_cost.study_a.training import summary as training_summary

from tests.fixtures.report_rows import training_rows


def _rows(repeat_levels, epochs=4, noise=0.0, seed=0) -> pl.DataFrame:
    """eager on one dataset: repeat r's epochs around repeat_levels[r] ms per sample, epoch 0 twice as slow."""
    rng = np.random.default_rng(seed)
    defaults = dict.fromkeys(tables.schema("training"))
    rows = []
    for repeat, level in enumerate(repeat_levels):
        for epoch in range(epochs):
            for phase in ("train", "eval"):
                t = level * (2.0 if epoch == 0 else 1.0) * (1 + noise * rng.standard_normal())
                rows.append({**defaults, "run_id": f"r{repeat}", "backend": "eager", "dataset": "d",
                             "init": "i", "repeat": repeat, "seed": repeat, "epoch": epoch, "phase": phase,
                             "status": "ok", "accuracy": 0.5, "loss": 1.0, "samples": 10, "time_s": 1.0,
                             "time_per_sample_ms": t})
    return tables.frame("training", rows)


def test_steady_time_is_the_median_of_repeat_medians_and_its_interval_spans_the_repeats():
    s = training_summary.training_summary(_rows([10.0, 12.0, 14.0], noise=0.01)).row(0, named=True)
    assert s["train_time_repeats"] == 3 and s["eval_time_repeats"] == 3
    assert s["train_time_per_sample_ms_steady"] == pytest.approx(12.0, rel=0.03)
    # the spread between repeats (10-14 ms), not the 1% within each, sets the interval
    assert s["train_time_per_sample_ms_steady_low"] < 11.0 and s["train_time_per_sample_ms_steady_high"] > 13.0
    assert s["train_time_per_sample_ms_first"] == pytest.approx(24.0, rel=0.03)   # the first epoch kept apart
    assert s["train_time_per_sample_ms_first_low"] < 22.0 < 26.0 < s["train_time_per_sample_ms_first_high"]


def test_repeats_that_agree_give_a_narrow_interval():
    s = training_summary.training_summary(_rows([10.0, 10.0, 10.0], noise=0.01)).row(0, named=True)
    low, high = s["eval_time_per_sample_ms_steady_low"], s["eval_time_per_sample_ms_steady_high"]
    assert low <= s["eval_time_per_sample_ms_steady"] <= high and (high - low) / 10.0 < 0.05


def test_one_repeat_has_no_first_epoch_interval_and_a_steady_one_of_its_epochs():
    s = training_summary.training_summary(_rows([10.0], noise=0.01)).row(0, named=True)
    assert s["train_time_repeats"] == 1 and s["train_time_per_sample_ms_first"] == pytest.approx(20.0, rel=0.05)
    assert s["train_time_per_sample_ms_first_low"] is None and s["train_time_per_sample_ms_first_high"] is None
    assert s["train_time_per_sample_ms_steady_low"] <= s["train_time_per_sample_ms_steady"]


def test_one_epoch_has_no_steady_time_and_not_run_backends_none_at_all():
    summary = training_summary.training_summary(training_rows(epochs=1))
    assert summary["train_time_per_sample_ms_steady"].null_count() == summary.height
    assert summary["train_time_per_sample_ms_steady_low"].null_count() == summary.height
    cudnn = summary.filter(pl.col("backend") == "cudnn")
    assert cudnn["train_time_per_sample_ms_first"].null_count() == cudnn.height
    assert cudnn["train_time_repeats"].null_count() == cudnn.height
