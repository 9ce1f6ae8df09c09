"""The three oracles on hand-made cost tables with known answers, and the DP against exhaustive search."""
import numpy as np
import pytest

from abstraction_cost.study_b.models import oracles
from abstraction_cost.study_b.models.oracles import CostModel, OracleError


def test_best_of_two_runs_picks_each_faster_block_and_keeps_ties_eager():
    d = oracles.best_of_two_runs([1.0, 5.0, 2.0], [2.0, 3.0, 2.0])
    assert d.choice == (0, 1, 0)
    assert d.predicted_ms == pytest.approx(6.0)
    assert d.compiled_blocks == (1,)


def test_study_recurrence_without_switch_costs_is_best_of_two_runs():
    rng = np.random.default_rng(0)
    for _ in range(20):
        e, c = rng.uniform(0.1, 2.0, 9), rng.uniform(0.1, 2.0, 9)
        dp = oracles.dynamic_programme(CostModel.without_switch_costs(e, c))
        btr = oracles.best_of_two_runs(e, c)
        assert dp.choice == btr.choice
        assert dp.predicted_ms == pytest.approx(btr.predicted_ms)


# Block 1 is slower compiled; compiling only blocks 0 and 2 (best of two runs) pays two switches.
SWITCHY = CostModel(eager=np.array([10.0, 10.0, 10.0]), compiled=np.array([9.0, 11.0, 9.0]),
                    to_compiled=np.array([0.0, 1.5, 1.5]), to_eager=np.array([0.0, 0.5, 0.5]))


def test_switch_costs_hand_computed():
    assert SWITCHY.cost([0, 0, 0]) == pytest.approx(30.0)
    assert SWITCHY.cost([1, 1, 1]) == pytest.approx(29.0)
    assert SWITCHY.cost([1, 0, 1]) == pytest.approx(9 + 10 + 9 + 0.5 + 1.5)
    assert SWITCHY.cost([1, 0, 0]) == pytest.approx(29.5)
    assert SWITCHY.cost([0, 0, 1]) == pytest.approx(30.5)


def test_dynamic_programme_pays_for_switches_where_best_of_two_runs_does_not():
    btr = oracles.best_of_two_runs(SWITCHY.eager, SWITCHY.compiled)
    assert btr.choice == (1, 0, 1) and btr.predicted_ms == pytest.approx(28.0)
    assert SWITCHY.cost(btr.choice) == pytest.approx(30.0)   # what that choice costs once switches are paid
    dp = oracles.dynamic_programme(SWITCHY)
    assert dp.choice == (1, 1, 1) and dp.predicted_ms == pytest.approx(29.0)
    ex = oracles.exhaustive(SWITCHY)
    assert ex.choice == (1, 1, 1) and ex.predicted_ms == pytest.approx(29.0)


def test_a_cheap_switch_back_to_eager_is_taken():
    # the last block is much slower compiled and leaving the compiled graph costs little
    m = CostModel(eager=np.array([5.0, 5.0, 5.0, 5.0]), compiled=np.array([3.0, 3.0, 3.0, 9.0]),
                  to_compiled=np.array([0.0, 4.0, 4.0, 4.0]), to_eager=np.array([0.0, 0.2, 0.2, 0.2]))
    dp = oracles.dynamic_programme(m)
    assert dp.choice == (1, 1, 1, 0)
    assert dp.predicted_ms == pytest.approx(3 + 3 + 3 + 5 + 0.2)
    assert oracles.exhaustive(m) == dp


@pytest.mark.parametrize("seed", range(25))
def test_dynamic_programme_finds_the_exhaustive_optimum(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 13))
    m = CostModel(rng.uniform(0.1, 3, n), rng.uniform(0.1, 3, n),
                  rng.uniform(-0.3, 1.5, n), rng.uniform(-0.3, 1.5, n))   # negative: a switch that saves time
    dp, ex = oracles.dynamic_programme(m), oracles.exhaustive(m, chunk=64)
    brute = min(m.cost(c) for c in oracles.all_choices(n))
    assert dp.predicted_ms == pytest.approx(ex.predicted_ms) == pytest.approx(brute)
    assert m.cost(dp.choice) == pytest.approx(dp.predicted_ms)


def test_cost_model_from_prefix_times_recovers_the_truth():
    truth = CostModel(np.array([1.0, 2.0, 3.0]), np.array([2.0, 1.0, 1.0]),
                      np.array([0.0, 0.5, 0.25]), np.array([0.0, 0.1, 0.2]))
    p0 = 0.05
    pe = p0 + np.concatenate([[0], np.cumsum(truth.eager)])
    pc = p0 + np.concatenate([[0], np.cumsum(truth.compiled)])
    m_ec = np.array([np.nan, pe[1] + 1.0 + 0.5, pe[2] + 1.0 + 0.25])
    m_ce = np.array([np.nan, pc[1] + 2.0 + 0.1, pc[2] + 3.0 + 0.2])
    got = CostModel.from_prefix_times(pe, pc, m_ec, m_ce)
    for field in ("eager", "compiled", "to_compiled", "to_eager"):
        np.testing.assert_allclose(getattr(got, field), getattr(truth, field))
    # all-eager and all-compiled choices telescope back to the measured whole prefixes
    assert got.cost([0, 0, 0]) == pytest.approx(pe[-1] - pe[0])
    assert got.cost([1, 1, 1]) == pytest.approx(pc[-1] - pc[0])


def test_errors_name_the_shape_at_fault():
    with pytest.raises(OracleError, match=r"compiled has shape \(2,\)"):
        CostModel(np.zeros(3), np.zeros(2), np.zeros(3), np.zeros(3))
    with pytest.raises(OracleError, match="mixed prefix times"):
        CostModel.from_prefix_times(np.zeros(4), np.zeros(4), np.zeros(2), np.zeros(3))
    with pytest.raises(OracleError, match="max_exhaustive_blocks"):
        oracles.exhaustive(CostModel.without_switch_costs(np.ones(5), np.ones(5)), max_blocks=4)
    with pytest.raises(OracleError, match="each 0"):
        SWITCHY.cost([0, 2, 1])


def test_choice_strings_round_trip():
    assert oracles.choice_string((1, 0, 1)) == "cec"
    assert oracles.parse_choice("cec") == (1, 0, 1)
    with pytest.raises(OracleError):
        oracles.parse_choice("cx")
