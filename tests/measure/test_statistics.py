"""Bootstrap medians and speedup intervals (measure/statistics.py)."""
import numpy as np
import pytest

from abstraction_cost.measure import statistics as st


def test_speedup_is_ratio_of_medians():
    s = st.speedup([2.0, 4.0, 100.0], [1.0, 2.0, 3.0], resamples=200)
    assert s.estimate == pytest.approx(4.0 / 2.0)


def test_interval_contains_estimate_and_is_ordered():
    rng = np.random.default_rng(1)
    s = st.speedup(rng.normal(10, 0.5, 40), rng.normal(5, 0.5, 40), resamples=2000)
    assert s.low <= s.estimate <= s.high
    assert 1.7 < s.low and s.high < 2.3
    assert not s.includes_one


def test_equal_samples_include_one():
    rng = np.random.default_rng(2)
    a = rng.normal(10, 1, 20)
    s = st.speedup(a, rng.permutation(a), resamples=2000)
    assert s.estimate == pytest.approx(1.0)
    assert s.includes_one


def test_fixed_seed_reproduces_and_other_seed_differs():
    rng = np.random.default_rng(3)
    a, b = rng.normal(10, 2, 15), rng.normal(9, 2, 15)
    assert st.speedup(a, b, seed=7) == st.speedup(a, b, seed=7)
    assert st.speedup(a, b, seed=7) != st.speedup(a, b, seed=8)


def test_wider_confidence_gives_wider_interval():
    rng = np.random.default_rng(4)
    a, b = rng.normal(10, 2, 30), rng.normal(9, 2, 30)
    narrow = st.speedup(a, b, confidence=0.5)
    wide = st.speedup(a, b, confidence=0.99)
    assert wide.low < narrow.low and wide.high > narrow.high


def test_median_interval():
    iv = st.median_interval([1.0, 2.0, 3.0, 4.0, 5.0], resamples=500)
    assert iv.estimate == 3.0
    assert 1.0 <= iv.low <= 3.0 <= iv.high <= 5.0


def test_single_sample_gives_point_interval():
    s = st.speedup([4.0], [2.0], resamples=50)
    assert (s.estimate, s.low, s.high) == (2.0, 2.0, 2.0)


def test_columns():
    cols = st.speedup([2.0, 2.0], [1.0, 1.0], resamples=10).columns()
    assert cols == {"speedup": 2.0, "speedup_low": 2.0, "speedup_high": 2.0, "speedup_includes_one": False}


@pytest.mark.parametrize("bad", [[], [float("nan")], [[1.0, 2.0]]])
def test_rejects_bad_samples(bad):
    with pytest.raises(ValueError, match="sample"):
        st.speedup(bad, [1.0])


def test_rejects_bad_settings():
    with pytest.raises(ValueError, match="confidence"):
        st.speedup([1.0], [1.0], confidence=1.0)
    with pytest.raises(ValueError, match="resamples"):
        st.median_interval([1.0], resamples=0)
    with pytest.raises(ValueError, match="positive"):
        st.speedup([1.0], [0.0])


def test_union_length_counts_overlapping_intervals_once():
    assert st.union_length([(5, 7), (0, 2), (1, 3), (6, 6.5)]) == 5
    assert st.union_length([]) == 0


def test_a_two_level_resample_draws_one_inner_statistic_per_drawn_invocation(monkeypatch):
    """k invocations drawn per resample: k inner statistics per resample in all (each invocation's as often as it was
    drawn), not k for every invocation; the t quantile is scipy.stats' t.ppf."""
    asked = []
    real = st._resampled_medians
    monkeypatch.setattr(st, "_resampled_medians", lambda a, m, rng: asked.append(m) or real(a, m, rng))
    groups = [[1.0, 1.1, 0.9, 1.05], [1.2, 1.3, 1.25], [0.95, 1.0], [1.1, 1.0, 1.05]]
    interval = st.hierarchical_interval(groups, resamples=500)
    assert sum(asked) == 500 * len(groups) and len(asked) <= len(groups)
    assert interval.low <= interval.estimate <= interval.high
    from scipy.stats import t
    logs = np.log([1.0, 1.2, 1.1])
    half = t.ppf(0.975, 2) * logs.std(ddof=1) / np.sqrt(3)
    assert st.invocation_t_interval([1.0, 1.2, 1.1]) == pytest.approx((np.exp(logs.mean() - half),
                                                                               np.exp(logs.mean() + half)))
