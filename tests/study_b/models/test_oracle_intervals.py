"""Oracle predictions and their bootstrap intervals on hand-made layer rows whose truth is known.

The rows mimic the GPU measurements that exposed the defect: blocks of 0.1-0.3 ms, prefixes of a few ms with
per-call noise, round-wide drift and bursts that slow all repeats of a probe in a round, so that layer
subtraction goes negative in some rounds and some resamples.
"""
import numpy as np
import pytest

from abstraction_cost import tables
from abstraction_cost.study_b.models import layer_fit, oracles, summary as vision_summary
from abstraction_cost.study_b.models.oracles import CostModel

CASE = {"model": "mobilenet_v2", "pair": "gpu", "mode": "default", "batch_size": 1, "resolution": 224,
        "numerics": "fp32", "memory_format": "contiguous"}
EMPTY_MS = 0.012
# compiling blocks 2..4 saves 0.45 ms and its two switches cost 0.2 ms (entering 0.15, leaving 0.05): the
# optimum eeccceee beats every other choice by at least 0.1 ms
TRUTH = CostModel(eager=np.array([0.10, 0.15, 0.30, 0.30, 0.30, 0.12, 0.20, 0.10]),
                  compiled=np.array([0.25, 0.25, 0.15, 0.15, 0.15, 0.20, 0.25, 0.12]),
                  to_compiled=np.array([0.0, *[0.15] * 7]), to_eager=np.array([0.0, *[0.05] * 7]))


def _truth_probes(truth: CostModel) -> dict[tuple[str, str], np.ndarray]:
    """{(configuration, measure): true times per block / prefix / boundary}, as oracles.py defines them."""
    pe = EMPTY_MS + np.concatenate([[0], np.cumsum(truth.eager)])
    pc = EMPTY_MS + np.concatenate([[0], np.cumsum(truth.compiled)])
    i = np.arange(1, truth.n)
    return {("cuda", "timer"): truth.eager, ("triton", "timer"): truth.compiled,
            ("cuda", "prefix"): pe, ("triton", "prefix"): pc,
            ("triton", "mixed_to_compiled"): dict(zip(i, pe[i] + truth.compiled[i] + truth.to_compiled[i])),
            ("triton", "mixed_to_eager"): dict(zip(i, pc[i] + truth.eager[i] + truth.to_eager[i]))}


def layer_rows(rounds: int, seed: int, truth: CostModel = TRUTH, repeats: int = 2, noise_ms: float = 0.08,
               drift: float = 0.03, burst: float = 0.1, burst_ms: float = 3.0):
    """vision_layer_times rows: the truth × a drift shared by the round, + a burst that slows every repeat of a
    probe in a round together (its calls run back to back; `burst` of them), + one-sided noise per call."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(rounds):
        scale = 1 + drift * rng.standard_normal()
        for (configuration, measure), times in _truth_probes(truth).items():
            for block, t in (times.items() if isinstance(times, dict) else enumerate(times)):
                slowed = t * scale + burst_ms * rng.uniform() * (rng.uniform() < burst)
                for k in range(repeats):
                    rows.append({**CASE, "configuration": configuration, "measure": measure, "block": int(block),
                                 "block_name": f"b{block}", "block_kind": "InvertedResidual", "round": r,
                                 "repeat": k, "time_ms": float(slowed + noise_ms * abs(rng.standard_normal())),
                                 "status": "ok", "message": None, "run_id": "r1"})
    return tables.frame("vision_layer_times", rows)


def oracle_rows(rounds: int, seed: int, resamples: int = 400, **noise) -> dict[str, dict]:
    df = layer_rows(rounds, seed, **noise)
    rows = vision_summary.oracle_rows(df, resamples, 0.95, seed, 20)
    tables.frame("vision_oracles", rows)   # the schema is unchanged
    return {r["oracle"]: r for r in rows}


def _width(row: dict) -> float:
    return row["predicted_ms_high"] - row["predicted_ms_low"]


# ---- the order-restricted fit ----

def _kkt_holds(y, fit, parent, tol=1e-9) -> bool:
    """Optimality of a least-squares fit under fit[parent] <= fit[child]: feasible, residuals sum to 0, every
    subtree's residual sum >= 0, and = 0 where the subtree's top sits strictly above its parent."""
    residual = fit - y
    subtree = residual.copy()
    for v in range(len(y) - 1, 0, -1):
        subtree[parent[v]] += subtree[v]
    children = range(1, len(y))
    return (abs(subtree[0]) < tol
            and all(fit[parent[v]] <= fit[v] + tol and subtree[v] >= -tol for v in children)
            and all(abs(subtree[v]) < tol for v in children if fit[v] > fit[parent[v]] + tol))


@pytest.mark.parametrize("seed", range(40))
def test_monotone_fit_is_the_least_squares_fit_under_the_order(seed):
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 25))
    parent = [-1, *(int(rng.integers(0, v)) for v in range(1, size))]
    y = rng.normal(size=size)
    assert _kkt_holds(y, layer_fit.monotone_fit(y, parent), parent)


def test_monotone_fit_pools_a_violating_chain_and_keeps_an_ordered_one():
    chain = [-1, 0, 1, 2]
    np.testing.assert_allclose(layer_fit.monotone_fit([1.0, 3.0, 2.0, 4.0], chain), [1.0, 2.5, 2.5, 4.0])
    np.testing.assert_array_equal(layer_fit.monotone_fit([1.0, 2.0, 2.0, 5.0], chain), [1.0, 2.0, 2.0, 5.0])
    with pytest.raises(ValueError, match="parents first"):
        layer_fit.monotone_fit([1.0, 2.0], [1, -1])


def test_monotone_prefixes_obey_the_order_of_prefix_times():
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(1, 12))
        p = np.concatenate([[0.01], 0.01 + np.cumsum(rng.uniform(0.05, 0.3, n))]) + rng.normal(0, 0.2, n + 1)
        m = np.concatenate([[np.nan], p[1:n] + rng.normal(0.15, 0.2, n - 1)])
        fp, fm = layer_fit.monotone_prefixes(p, m)
        assert (np.diff(fp) >= 0).all() and (fm[1:] >= fp[1:n]).all() and np.isnan(fm[0])


# ---- the oracles' predictions and intervals ----

def test_the_hand_made_rows_reproduce_the_defect():
    """Raw subtraction of prefix medians goes negative on resampled rounds: what the fit has to handle."""
    s = layer_fit.samples_from_rows(layer_rows(4, 0), "cuda", "triton")
    idx = layer_fit.round_resamples(4, 400, 0)
    raw = [np.diff(layer_fit.medians(s.prefix_eager, r)).min() for r in idx]
    assert min(raw) < 0
    fitted = [layer_fit.prefix_fit(s, r).model for r in idx]
    assert min(min(m.eager.min(), m.compiled.min()) for m in fitted) >= 0


@pytest.mark.parametrize("seed", range(8))
def test_predictions_and_intervals_are_never_negative_and_contain_the_point(seed):
    for row in oracle_rows(4, seed).values():
        assert 0 <= row["predicted_ms_low"] <= row["predicted_ms"] <= row["predicted_ms_high"], row
        assert 0 < row["predicted_speedup_low"] <= row["predicted_speedup"] <= row["predicted_speedup_high"], row
        assert row["switch_model_ms"] >= 0


def test_the_dynamic_programme_chooses_on_some_rounds_and_is_judged_on_the_others():
    """The choice is the programme's optimum of the model fitted to the even rounds (exhaustive search confirms
    it there); predicted_ms is what that choice costs in the model fitted to the odd rounds, which it never saw.
    Selective compilation builds exactly that choice."""
    df = layer_rows(4, 1)
    s = layer_fit.samples_from_rows(df, "cuda", "triton")
    choosing, held_out = layer_fit.prefix_fit(s, np.array([0, 2])), layer_fit.prefix_fit(s, np.array([1, 3]))
    best = oracles.dynamic_programme(choosing.model)
    dp = {r["oracle"]: r for r in vision_summary.oracle_rows(df, 100, 0.95, 0, 20)}["dp"]
    assert dp["choice"] == oracles.choice_string(best.choice) == dp["exhaustive_choice"]
    assert dp["exhaustive_ms"] == pytest.approx(choosing.empty_ms + best.predicted_ms)
    assert dp["predicted_ms"] == pytest.approx(held_out.empty_ms + held_out.model.cost(best.choice))
    assert dp["predicted_ms"] == pytest.approx(dp["switch_model_ms"]) and dp["dp_matches_exhaustive"] is True
    assert dp["prediction_rounds"] == "held-out"


def test_a_held_out_prediction_promises_no_gain_that_is_not_there():
    """Compiling changes nothing here (compiled = eager in every block), so any gain an oracle finds is noise it
    chose. Judged on the rounds it chose on, the programme's choice promises a speedup; judged on held-out
    rounds, its predicted speedup averages 1."""
    same = CostModel(eager=TRUTH.eager, compiled=TRUTH.eager, to_compiled=np.zeros(8), to_eager=np.zeros(8))
    own, held = [], []
    for seed in range(30):
        df = layer_rows(6, seed, truth=same, burst=0.0)
        s = layer_fit.samples_from_rows(df, "cuda", "triton")
        fit = layer_fit.prefix_fit(s, np.array([0, 2, 4]))
        own.append(fit.eager_ms / (fit.empty_ms + oracles.dynamic_programme(fit.model).predicted_ms))
        held.append({r["oracle"]: r for r in vision_summary.oracle_rows(df, 50, 0.95, seed, 20)}["dp"][
            "predicted_speedup"])
    assert np.mean(own) > 1.01
    assert abs(np.mean(held) - 1) < 0.5 * (np.mean(own) - 1)


def test_intervals_narrow_as_rounds_grow():
    """Mean width over a few data sets (one 8-round bootstrap width is itself noisy): about 1/sqrt(rounds); the
    predictions rest on half the rounds (held out from the choice)."""
    counts = (8, 32, 128)
    widths = np.array([[[_width(row) for row in oracle_rows(rounds, seed, resamples=200).values()]
                        for seed in range(6)] for rounds in counts]).mean(axis=1)   # [rounds, oracle]
    assert (widths[0] > 1.3 * widths[1]).all() and (widths[1] > 1.3 * widths[2]).all(), widths


def test_with_many_rounds_the_dynamic_programme_finds_and_brackets_the_truth():
    best = oracles.dynamic_programme(TRUTH)
    assert oracles.choice_string(best.choice) == "eeccceee"
    dp = oracle_rows(64, 0, burst=0.0)["dp"]
    assert dp["choice"] == "eeccceee"
    # medians estimate median calls: each probe's is the truth plus the median of its one-sided noise (|N(0, 1)|:
    # 0.674 noise_ms), and the plan's telescoped sum has one more probe added than subtracted
    median_truth = EMPTY_MS + best.predicted_ms + 0.674 * 0.08
    assert dp["predicted_ms_low"] <= median_truth <= dp["predicted_ms_high"]
    assert dp["predicted_ms"] == pytest.approx(median_truth, abs=0.02)


def test_without_noise_every_interval_is_its_point():
    """Point and interval are one estimator: best of two runs by subtraction is the switch-free sum in both
    (resampling once charged it switch costs the point did not, so its interval missed the point)."""
    rows = oracle_rows(3, 0, resamples=50, noise_ms=0.0, drift=0.0, burst=0.0)
    for row in rows.values():
        assert row["predicted_ms_low"] == pytest.approx(row["predicted_ms"]) == pytest.approx(row["predicted_ms_high"])
        assert row["predicted_speedup_low"] == pytest.approx(row["predicted_speedup_high"])
    sub = rows["btr_subtraction"]
    assert sub["choice"] == "eeccceee"
    assert sub["predicted_ms"] == pytest.approx(EMPTY_MS + np.minimum(TRUTH.eager, TRUTH.compiled).sum())
    assert sub["switch_model_ms"] == pytest.approx(sub["predicted_ms"] + 0.15 + 0.05)
