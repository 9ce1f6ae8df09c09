"""From the layer rows of one (model, pair) job (layers.py) to per-block times and the switch-cost model the oracles
charge (oracles.CostModel): prefix and mixed medians fitted so that no block takes negative time, per round
resample. No torch: rule vision_summaries imports this."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from .oracles import CostModel


@dataclass(frozen=True)
class LayerSamples:
    """The ok rows of one (model, pair) job as arrays [probe, round, repeat] (times in ms)."""
    n: int
    names: list[str]
    kinds: list[str]
    timer_eager: np.ndarray      # [block, round, repeat]
    timer_compiled: np.ndarray
    prefix_eager: np.ndarray     # [k = 0..n, round, repeat]
    prefix_compiled: np.ndarray
    mixed_to_compiled: np.ndarray  # [i = 0..n-1 (row 0 is NaN), round, repeat]
    mixed_to_eager: np.ndarray


class IncompleteLayers(ValueError):
    """The layer rows lack a measure, block, round or repeat the analysis needs."""


def samples_from_rows(df: pl.DataFrame, eager_configuration: str, compiled_configuration: str) -> LayerSamples:
    ok = df.filter(pl.col("status") == "ok")
    if ok.is_empty():
        raise IncompleteLayers("no ok layer rows")
    rounds = sorted(ok["round"].unique().to_list())
    repeats = sorted(ok["repeat"].unique().to_list())
    timer = ok.filter(pl.col("measure") == "timer")
    n = int(timer["block"].max()) + 1
    names = (timer.filter(pl.col("round") == rounds[0], pl.col("repeat") == repeats[0],
                          pl.col("configuration") == eager_configuration).sort("block")["block_name"].to_list())
    kinds = (timer.filter(pl.col("round") == rounds[0], pl.col("repeat") == repeats[0],
                          pl.col("configuration") == eager_configuration).sort("block")["block_kind"].to_list())

    def cube(measure, configuration, blocks):
        part = ok.filter(pl.col("measure") == measure, pl.col("configuration") == configuration)
        a = np.full((len(blocks), len(rounds), len(repeats)), np.nan)
        index = {b: i for i, b in enumerate(blocks)}
        r_index = {r: i for i, r in enumerate(rounds)}
        k_index = {k: i for i, k in enumerate(repeats)}
        for b, r, k, t in part.select("block", "round", "repeat", "time_ms").iter_rows():
            if b in index:
                a[index[b], r_index[r], k_index[k]] = t
        return a

    data = LayerSamples(
        n=n, names=names, kinds=kinds,
        timer_eager=cube("timer", eager_configuration, range(n)),
        timer_compiled=cube("timer", compiled_configuration, range(n)),
        prefix_eager=cube("prefix", eager_configuration, range(n + 1)),
        prefix_compiled=cube("prefix", compiled_configuration, range(n + 1)),
        mixed_to_compiled=cube("mixed_to_compiled", compiled_configuration, range(n)),
        mixed_to_eager=cube("mixed_to_eager", compiled_configuration, range(n)))
    for field in ("timer_eager", "timer_compiled", "prefix_eager", "prefix_compiled"):
        if np.isnan(getattr(data, field)).any():
            raise IncompleteLayers(f"layer rows: measure {field} lacks some (block, round, repeat)")
    for field in ("mixed_to_compiled", "mixed_to_eager"):
        if np.isnan(getattr(data, field)[1:]).any():
            raise IncompleteLayers(f"layer rows: measure {field} lacks some (boundary, round, repeat)")
    return data


def medians(a: np.ndarray, rounds: np.ndarray | None = None) -> np.ndarray:
    """Median over (round, repeat) per probe; `rounds` picks (with repetition) the rounds to use."""
    if rounds is not None:
        a = a[:, rounds, :]
    return np.median(a.reshape(a.shape[0], -1), axis=1)


def monotone_fit(values, parent) -> np.ndarray:
    """Least-squares fit of `values` under fit[parent[v]] <= fit[v], on a tree listed parents first (root: -1).

    Isotonic regression on a tree whose root is its least element, by pooling bottom up (Pardalos & Xue 1999):
    a node absorbs the lowest-mean block hanging below it while that mean is below its own. Every fitted value
    is the mean of a pooled set of values, so values that already obey the order come back unchanged.
    """
    y = np.asarray(values, float)
    if any(not -1 <= p < v for v, p in enumerate(parent)) or len(parent) != len(y):
        raise ValueError(f"monotone fit: parent {list(parent)} does not list a tree parents first")
    total, count, members = y.copy(), np.ones(len(y)), [[v] for v in range(len(y))]
    below: list[list[int]] = [[] for _ in y]           # tops of the blocks hanging directly below block v
    for v, p in enumerate(parent):
        if p >= 0:
            below[p].append(v)
    for v in reversed(range(len(y))):
        while below[v]:
            low = min(below[v], key=lambda b: total[b] / count[b])
            if total[low] / count[low] >= total[v] / count[v]:
                break
            below[v].remove(low)
            below[v] += below[low]
            total[v] += total[low]
            count[v] += count[low]
            members[v] += members[low]
            members[low] = []
    fit = np.empty_like(y)
    for v, block in enumerate(members):
        fit[block] = total[v] / count[v]
    return fit


def monotone_prefixes(prefix, mixed) -> tuple[np.ndarray, np.ndarray]:
    """P[0..n] and M[1..n-1] (element 0 of M ignored, returned NaN) fitted under P[k] <= P[k+1], P[i] <= M[i]."""
    p, m = np.asarray(prefix, float), np.asarray(mixed, float)
    n = len(p) - 1
    if p.ndim != 1 or n < 1 or m.shape != (n,):
        raise ValueError(f"monotone prefixes: shapes {p.shape} and {m.shape}; expected (n+1,) and (n,), n >= 1")
    parent = [-1, *range(n), *range(1, n)]             # P[k] below P[k-1]; M[i] (node n+i) below P[i]
    fit = monotone_fit(np.concatenate([p, m[1:]]), parent)
    return fit[:n + 1], np.concatenate([[np.nan], fit[n + 1:]])


@dataclass(frozen=True)
class PrefixFit:
    """One estimate of the switch-cost model, from prefix and mixed medians fitted so no block takes negative time."""
    empty_ms: float      # P_e[0]: the empty call
    eager_ms: float      # P_e[n]: the whole model eager
    model: CostModel


PROBES = ("prefix_eager", "mixed_to_compiled", "prefix_compiled", "mixed_to_eager")


def prefix_fit(s: LayerSamples, rounds: np.ndarray | None = None) -> PrefixFit:
    """The switch-cost model (oracles.py) from the medians of `rounds`, fitted by monotone_prefixes."""
    return _fit(*(medians(getattr(s, probe), rounds) for probe in PROBES))


def prefix_fits(s: LayerSamples, idx: np.ndarray) -> list[PrefixFit]:
    """prefix_fit for each resample of idx [resample, round] (round_resamples), its medians taken in one pass."""
    meds = [resampled_medians(getattr(s, probe), idx) for probe in PROBES]
    return [_fit(*(m[:, k] for m in meds)) for k in range(idx.shape[0])]


def _fit(prefix_eager, mixed_to_compiled, prefix_compiled, mixed_to_eager) -> PrefixFit:
    pe, m_ec = monotone_prefixes(prefix_eager, mixed_to_compiled)
    pc, m_ce = monotone_prefixes(prefix_compiled, mixed_to_eager)
    return PrefixFit(float(pe[0]), float(pe[-1]), CostModel.from_prefix_times(pe, pc, m_ec, m_ce))


def resampled_medians(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """[probe, resample]: medians of a [probe, round, repeat] over each resample's rounds (idx [resample, round])."""
    picked = a[:, idx, :]                                      # [probe, resample, round, repeat]
    return np.median(picked.reshape(a.shape[0], idx.shape[0], -1), axis=2)


def round_resamples(n_rounds: int, resamples: int, seed: int) -> np.ndarray:
    """[resample, round] indices: rounds drawn with replacement (a round keeps its repeats together)."""
    return np.random.default_rng(seed).integers(0, n_rounds, size=(resamples, n_rounds))
