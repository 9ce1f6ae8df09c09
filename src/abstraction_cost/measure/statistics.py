"""Medians with bootstrap 95% intervals, and speedups as ratios of medians with the same intervals.

    s = speedup(eager_ms, compiled_ms, resamples=10_000, confidence=0.95, seed=0)
    s.estimate, s.low, s.high, s.includes_one     # estimate = median(eager) / median(compiled)
    hierarchical_interval([[calls of invocation 1], [calls of invocation 2], ...])
    paired_speedup([[eager's block medians, invocation 1], ...], [[compiled's, same blocks], ...])

Intervals are percentile bootstrap intervals: the statistic is recomputed on each resample, and the interval is
the (1-c)/2 and (1+c)/2 quantiles of those. A fixed seed makes every interval reproducible from the table it was
computed from. `includes_one` says that the data cannot tell a speedup from a slowdown at that confidence.

Measurements taken in several process invocations are resampled the way they vary (Kalibera & Jones, ISMM 2013):
invocations with replacement first, then calls within each chosen invocation; the estimate is the median of the
invocations' medians. An interval from one invocation's calls describes that process at that moment only. With
few invocations the bootstrap cannot see how far they spread (three invocations have few distinct resamples), so
the interval is widened to the t-interval of the invocations' log medians where that is wider. Times
measured in interleaved turns are pairs: paired_speedup resamples the turns together, so that a slow period of
the host, which every implementation met in the same turn, cancels out of the ratio.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float

    def includes(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Speedup(Interval):
    @property
    def includes_one(self) -> bool:
        return self.includes(1.0)

    def columns(self, prefix: str = "speedup") -> dict:
        """As table columns: <prefix>, <prefix>_low, <prefix>_high, <prefix>_includes_one."""
        return {prefix: self.estimate, f"{prefix}_low": self.low, f"{prefix}_high": self.high,
                f"{prefix}_includes_one": self.includes_one}


def _sample(values: Sequence[float], name: str) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name}: need a non-empty 1-d sample, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: sample has non-finite values")
    return a


def _check(resamples: int, confidence: float) -> None:
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")


def _resampled_medians(a: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, a.size, size=(resamples, a.size))
    return np.median(a[idx], axis=1)


def median(values: Sequence[float]) -> float:
    return float(np.median(_sample(values, "median")))


def median_interval(values: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES,
                    confidence: float = DEFAULT_CONFIDENCE, seed: int = 0) -> Interval:
    """The sample's median and its percentile-bootstrap interval."""
    _check(resamples, confidence)
    a = _sample(values, "median_interval")
    meds = _resampled_medians(a, resamples, np.random.default_rng(seed))
    q = (1 - confidence) / 2
    return Interval(float(np.median(a)), float(np.quantile(meds, q)), float(np.quantile(meds, 1 - q)))


def speedup(baseline: Sequence[float], treatment: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES,
            confidence: float = DEFAULT_CONFIDENCE, seed: int = 0) -> Speedup:
    """median(baseline) / median(treatment) (times: above 1 means the treatment is faster), with its interval."""
    _check(resamples, confidence)
    b = _sample(baseline, "speedup baseline")
    t = _sample(treatment, "speedup treatment")
    if np.any(t <= 0) or np.any(b <= 0):
        raise ValueError("speedup: times must be positive")
    rng = np.random.default_rng(seed)
    ratios = _resampled_medians(b, resamples, rng) / _resampled_medians(t, resamples, rng)
    q = (1 - confidence) / 2
    return Speedup(float(np.median(b) / np.median(t)), float(np.quantile(ratios, q)),
                   float(np.quantile(ratios, 1 - q)))


def _groups(groups: Sequence[Sequence[float]], name: str) -> list[np.ndarray]:
    if not groups:
        raise ValueError(f"{name}: need at least one invocation")
    return [_sample(g, f"{name} invocation {i}") for i, g in enumerate(groups)]


def _quantiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    q = (1 - confidence) / 2
    return float(np.quantile(values, q)), float(np.quantile(values, 1 - q))


def _two_level(k: int, resamples: int, rng: np.random.Generator,
               inner: Callable[[int, int], np.ndarray]) -> np.ndarray:
    """Each resample's median over k invocations drawn with replacement, each draw's statistic resampled within its
    invocation afresh: inner(i, m) gives m such statistics of invocation i, one per time it was drawn (drawing them
    for every invocation at every draw took k times the work for the same distribution)."""
    pick = rng.integers(0, k, size=(resamples, k))
    drawn = np.empty((resamples, k))
    for i in range(k):
        at = pick == i
        if at.any():
            drawn[at] = inner(i, int(at.sum()))
    return np.median(drawn, axis=1)


def hierarchical_interval(groups: Sequence[Sequence[float]], *, resamples: int = DEFAULT_RESAMPLES,
                          confidence: float = DEFAULT_CONFIDENCE, seed: int = 0) -> Interval:
    """The median over invocations of each invocation's median, and its two-level bootstrap interval: each
    resample draws the invocations with replacement, then each drawn invocation's calls with replacement."""
    _check(resamples, confidence)
    gs = _groups(groups, "hierarchical_interval")
    rng = np.random.default_rng(seed)
    k = len(gs)
    stats = _two_level(k, resamples, rng, lambda i, m: _resampled_medians(gs[i], m, rng))
    medians = np.array([np.median(g) for g in gs])
    low, high = _quantiles(stats, confidence)
    if k > 1:
        t_low, t_high = invocation_t_interval(medians, confidence)
        low, high = min(low, t_low), max(high, t_high)
    return Interval(float(np.median(medians)), low, high)


def invocation_t_interval(medians: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """The t-interval of the invocations' medians, on the log scale (times are positive, their spread relative)."""
    from scipy.special import stdtrit   # the t quantile: scipy.stats, for t.ppf, took a second to import
    logs = np.log(np.asarray(medians, dtype=np.float64))
    k = logs.size
    if k < 2:
        raise ValueError("invocation_t_interval: need at least two invocations")
    half = stdtrit(k - 1, (1 + confidence) / 2) * logs.std(ddof=1) / np.sqrt(k)
    return float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))


def relative_half_width(medians: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> float:
    """Half the t-interval's width over the geometric mean: how precisely the invocations pin the time down
    (infinite with one invocation)."""
    if len(medians) < 2:
        return float("inf")
    low, high = invocation_t_interval(medians, confidence)
    return (high - low) / 2 / float(np.exp(np.log(np.asarray(medians, dtype=np.float64)).mean()))


def paired_speedup(baseline: Sequence[Sequence[float]], treatment: Sequence[Sequence[float]], *,
                   resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE,
                   seed: int = 0) -> Speedup:
    """median(baseline) / median(treatment) from paired turns: baseline[i][j] and treatment[i][j] were measured in
    turn j of invocation i. The estimate is the median over invocations of each invocation's ratio of medians;
    each resample draws invocations, then turns within each, keeping a turn's two times together. As in
    hierarchical_interval, with two invocations or more the interval is widened to the t-interval of the
    invocations' ratios: a bootstrap over 3 invocations cannot reach past their extremes, while the two sides of a
    pair run in separate processes, whose host speeds differ (docs/measurement.md)."""
    _check(resamples, confidence)
    bs, ts = _groups(baseline, "paired_speedup baseline"), _groups(treatment, "paired_speedup treatment")
    if len(bs) != len(ts) or any(b.size != t.size for b, t in zip(bs, ts)):
        raise ValueError("paired_speedup: baseline and treatment need the same invocations and turns")
    if any(np.any(b <= 0) or np.any(t <= 0) for b, t in zip(bs, ts)):
        raise ValueError("paired_speedup: times must be positive")
    rng = np.random.default_rng(seed)
    k = len(bs)

    def ratios(i: int, m: int) -> np.ndarray:   # m resamples of invocation i's turns, a turn's two times together
        idx = rng.integers(0, bs[i].size, size=(m, bs[i].size))
        return np.median(bs[i][idx], axis=1) / np.median(ts[i][idx], axis=1)
    stats = _two_level(k, resamples, rng, ratios)
    ratios_per_invocation = [float(np.median(b) / np.median(t)) for b, t in zip(bs, ts)]
    low, high = _quantiles(stats, confidence)
    if k > 1:
        t_low, t_high = invocation_t_interval(ratios_per_invocation, confidence)
        low, high = min(low, t_low), max(high, t_high)
    return Speedup(float(np.median(ratios_per_invocation)), low, high)


def union_length(intervals: Sequence[tuple[float, float]]) -> float:
    """Total length of the union of [start, end) intervals, in their own unit (overlaps counted once)."""
    total, end = 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total
