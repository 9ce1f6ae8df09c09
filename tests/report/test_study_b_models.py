"""Study B's end-to-end finding sentence: the study's claim per model, decided by the interval of the compiled
variant's paired speedup."""
from __future__ import annotations

import polars as pl
import pytest

from abstraction_cost.report import study_b_models as sbm
from abstraction_cost.report import verdicts


def _speedups(model: str, speedup: float, low: float, high: float, study: float | None) -> pl.DataFrame:
    return pl.DataFrame({"model": [model], "pair": ["gpu"], "mode": ["default"], "batch_size": [1],
                         "numerics": ["fp32"], "memory_format": ["contiguous"], "variant": ["compiled"],
                         "speedup": [speedup], "speedup_low": [low], "speedup_high": [high],
                         "study_speedup": [study], "status": ["ok"]})


@pytest.mark.parametrize("model,speedup,low,high,study,verdict,inside", [
    ("mobilenet_v2", 1.43, 1.24, 2.28, 1.63, verdicts.HOLDS, "inside"),            # faster, as the study
    ("mobilenet_v2", 1.09, 1.06, 1.40, 1.63, verdicts.HOLDS, "outside"),           # faster, by less
    ("mobilenet_v2", 1.02, 0.95, 1.10, 1.63, verdicts.NO_DIFFERENCE, "outside"),   # the interval holds 1
    ("resnet50", 0.90, 0.85, 0.95, 1.61, verdicts.DOES_NOT_HOLD, "outside"),      # slower compiled
    ("alexnet", 0.80, 0.70, 0.90, None, verdicts.HOLDS, None),                     # the study: slower
    ("alexnet", 1.20, 1.10, 1.30, None, verdicts.DOES_NOT_HOLD, None),
    ("densenet121", 1.05, 0.95, 1.12, None, verdicts.HOLDS, None),                 # the study: marginal
    ("squeezenet1_1", 1.30, 1.20, 1.40, None, verdicts.DOES_NOT_HOLD, None),       # a clear gain
    ("densenet121", 0.80, 0.75, 0.85, None, verdicts.DOES_NOT_HOLD, None),         # a clear loss
    ("squeezenet1_1", 1.13, 1.01, 1.37, None, verdicts.UNDECIDED, None),           # straddles the upper edge
    ("densenet121", 0.90, 0.82, 0.95, None, verdicts.UNDECIDED, None),             # slower, perhaps marginally
])
def test_each_models_claim_is_decided_by_its_interval(model, speedup, low, high, study, verdict, inside):
    said = sbm.e2e_finding(_speedups(model, speedup, low, high, study))
    assert said.endswith(f": {verdict}.") and f"{speedup:.2f}× [{low:.2f}–{high:.2f}]" in said
    assert model in said and "batch 1" in said
    if inside is not None:
        assert f"{study:.2f}×, {inside} this interval" in said
    if model in sbm.STUDY_MARGINAL:
        assert "(the study: marginal, within 1.15× either way)" in said


def test_models_the_study_gives_no_claim_for_are_left_out_and_none_left_says_so():
    said = sbm.e2e_finding(_speedups("vgg16", 1.13, 1.01, 1.37, None))
    assert "not measured here" in said and "vgg16" not in said
    assert "DenseNet-121 and SqueezeNet 1.1 marginal" in said
