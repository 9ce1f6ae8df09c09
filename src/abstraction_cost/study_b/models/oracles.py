"""Oracles for selective compilation: which blocks of a model to compile, and the time that choice predicts.

A model is a sequence of n blocks (models/blocks.py). A *choice* gives every block a state: 0 = eager,
1 = compiled (the block compiled as its own graph, so that any choice can be built from the same compiled blocks;
study_b/models/selective.py builds them). Three oracles:

- **Best of two runs** (the study's eq. 4.1, Table 5.1): Σ_i min(eager_i, compiled_i), each block in its faster
  state, no cost for switching. The study derives it from layer timers (arr_sum) or from layer subtraction.
- **Dynamic programme** over blocks under the switch-cost model below: the cheapest choice, found in O(n).
- **Exhaustive search** over all 2^n choices under the same model: the check that the programme finds the optimum
  of its own cost model (feasible for every model here: at most 20 blocks).

## The switch-cost model (what study_b/models/layers.py measures for it)
Time prefixes of the model: P_e[k] = blocks 0..k-1 all eager, P_c[k] = all compiled (each block its own graph),
k = 0..n, P[0] being the empty call (timer and synchronisation only). Layer subtraction gives each block's time in
a homogeneous neighbourhood, which already contains the cost of a same-state boundary:

    eager_i = P_e[i+1] - P_e[i]        compiled_i = P_c[i+1] - P_c[i]

A switch at the boundary before block i (i >= 1) is measured by two mixed prefixes, the first i blocks in one state
and block i in the other:

    M_ec[i] = (blocks 0..i-1 eager,    block i compiled)    to_compiled_i = M_ec[i] - P_e[i] - compiled_i
    M_ce[i] = (blocks 0..i-1 compiled, block i eager)       to_eager_i    = M_ce[i] - P_c[i] - eager_i

so to_compiled_i is what entering a compiled block from eager costs beyond the block's own compiled time (a
graph entry on an eager-layout tensor, a guard check, a layout conversion), and to_eager_i the same for leaving.
The predicted time of a choice s is

    T(s) = Σ_i time_i(s_i) + Σ_{i>=1} switch_i(s_{i-1}, s_i),   switch_i(a, a) = 0,
           switch_i(0, 1) = to_compiled_i,  switch_i(1, 0) = to_eager_i

All-eager and all-compiled choices reproduce P_e[n] - P_e[0] and P_c[n] - P_c[0] exactly (the sums
telescope; the empty call's timer overhead drops out).

Grouped by block, T(s) sums the times that one more block adds to a prefix (eager_i, compiled_i, to_compiled_i +
compiled_i, to_eager_i + eager_i): none is negative, so the true times obey P[k] <= P[k+1] and P[i] <= M[i].
Measured medians need not: differencing two long, noisy prefixes to get one short block can go negative, and a plan
summed from such terms can be predicted to take less than nothing. study_b/models/layers.py (monotone_prefixes) fits the
medians by least squares under that order (isotonic regression on the tree of prefixes), which changes nothing when
the medians already obey it, keeps the sums telescoping, and, being the projection onto a convex set that contains
the true times, is never further from them (in Euclidean distance) than the raw medians. A model built from the
fitted prefixes has every term >= 0, so every choice's T(s) >= 0.

The model is first order: a switch is charged once, at its boundary. What it cannot see, and the realised selective
measurement shows: an eager block after a compiled one may keep running on the compiled block's channels-last
output, changing later eager blocks' times too; and a run of compiled blocks compiled as ONE graph can fuse across
boundaries, which per-block graphs cannot (selective.py measures both constructions).

The study's own recurrence (its Fig. 4.2) charges nothing for a switch, so it reduces to best of two runs:
`dynamic_programme` with zero switch costs returns exactly the best-of-two-runs choice.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

EAGER, COMPILED = 0, 1
MAX_EXHAUSTIVE_BLOCKS = 24   # 2^24 choices × 24 blocks is the most a report job should enumerate


class OracleError(ValueError):
    """Cost arrays of the wrong shape, or a search too large to enumerate."""


@dataclass(frozen=True)
class CostModel:
    """Per-block times and switch costs (ms); element 0 of the switch arrays is unused (no boundary before block 0)."""

    eager: np.ndarray
    compiled: np.ndarray
    to_compiled: np.ndarray
    to_eager: np.ndarray

    def __post_init__(self):
        n = len(self.eager)
        for field in ("compiled", "to_compiled", "to_eager"):
            if np.shape(getattr(self, field)) != (n,):
                raise OracleError(f"cost model: {field} has shape {np.shape(getattr(self, field))}, "
                                  f"expected ({n},) like eager")
        if n == 0:
            raise OracleError("cost model: no blocks")

    @property
    def n(self) -> int:
        return len(self.eager)

    @classmethod
    def without_switch_costs(cls, eager, compiled) -> "CostModel":
        eager, compiled = np.asarray(eager, float), np.asarray(compiled, float)
        return cls(eager, compiled, np.zeros_like(eager), np.zeros_like(eager))

    @classmethod
    def from_prefix_times(cls, prefix_eager, prefix_compiled, mixed_to_compiled, mixed_to_eager) -> "CostModel":
        """From P_e[0..n], P_c[0..n] and the mixed prefixes M_ec[1..n-1], M_ce[1..n-1] (see the module doc).

        The mixed arrays have length n with element 0 ignored, so that index i is the boundary before block i.
        """
        pe, pc = np.asarray(prefix_eager, float), np.asarray(prefix_compiled, float)
        if pe.ndim != 1 or pe.shape != pc.shape or len(pe) < 2:
            raise OracleError(f"prefix times: shapes {pe.shape} and {pc.shape}; expected two (n+1,) arrays, n >= 1")
        n = len(pe) - 1
        m_ec, m_ce = np.asarray(mixed_to_compiled, float), np.asarray(mixed_to_eager, float)
        if m_ec.shape != (n,) or m_ce.shape != (n,):
            raise OracleError(f"mixed prefix times: shapes {m_ec.shape}, {m_ce.shape}; expected ({n},)")
        eager, compiled = np.diff(pe), np.diff(pc)
        to_compiled, to_eager = np.zeros(n), np.zeros(n)
        to_compiled[1:] = m_ec[1:] - pe[1:n] - compiled[1:]
        to_eager[1:] = m_ce[1:] - pc[1:n] - eager[1:]
        return cls(eager, compiled, to_compiled, to_eager)

    def cost(self, choice) -> float:
        """T(choice) under this model."""
        s = np.asarray(choice, dtype=int)
        if s.shape != (self.n,) or not np.isin(s, (EAGER, COMPILED)).all():
            raise OracleError(f"choice {choice!r}: expected {self.n} states, each 0 (eager) or 1 (compiled)")
        return float(self.costs(s[None, :])[0])

    def costs(self, choices: np.ndarray) -> np.ndarray:
        """T of each row of a (k, n) 0/1 array, vectorised."""
        c = choices.astype(bool)
        t = np.where(c, self.compiled, self.eager).sum(axis=1)
        enter = ~c[:, :-1] & c[:, 1:]
        leave = c[:, :-1] & ~c[:, 1:]
        return t + (enter * self.to_compiled[1:]).sum(axis=1) + (leave * self.to_eager[1:]).sum(axis=1)


@dataclass(frozen=True)
class Decision:
    choice: tuple[int, ...]   # per block: 0 eager, 1 compiled
    predicted_ms: float

    @property
    def compiled_blocks(self) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(self.choice) if s == COMPILED)


def best_of_two_runs(eager, compiled) -> Decision:
    """Each block in its faster state (ties stay eager); predicted time Σ min(eager_i, compiled_i)."""
    e, c = np.asarray(eager, float), np.asarray(compiled, float)
    if e.shape != c.shape or e.ndim != 1 or len(e) == 0:
        raise OracleError(f"best of two runs: shapes {e.shape} and {c.shape}; expected two equal (n,) arrays")
    choice = tuple(int(x) for x in (c < e))
    return Decision(choice, float(np.minimum(e, c).sum()))


def dynamic_programme(model: CostModel) -> Decision:
    """The cheapest choice under `model`: dp[i][s] = time_i(s) + min_a(dp[i-1][a] + switch_i(a, s)).

    Ties go to eager (the state that needs no compilation), both within a block and at the end.
    """
    time = np.stack([model.eager, model.compiled])             # [state, block]
    dp = np.empty((model.n, 2))
    came_from = np.zeros((model.n, 2), dtype=int)
    dp[0] = time[:, 0]
    for i in range(1, model.n):
        switch = np.array([[0.0, model.to_compiled[i]], [model.to_eager[i], 0.0]])  # [from, to]
        for s in (EAGER, COMPILED):
            options = dp[i - 1] + switch[:, s]
            came_from[i, s] = int(np.argmin(options))          # argmin keeps the first (eager) on ties
            dp[i, s] = options[came_from[i, s]] + time[s, i]
    state = int(np.argmin(dp[-1]))
    total = float(dp[-1, state])
    choice = [state]
    for i in range(model.n - 1, 0, -1):
        state = int(came_from[i, state])
        choice.append(state)
    return Decision(tuple(reversed(choice)), total)


def exhaustive(model: CostModel, max_blocks: int = MAX_EXHAUSTIVE_BLOCKS, chunk: int = 1 << 16) -> Decision:
    """The cheapest of all 2^n choices under `model` (ties: the first in binary order, eager-first)."""
    if model.n > max_blocks:
        raise OracleError(f"exhaustive search over 2^{model.n} choices: more than 2^{max_blocks}; "
                          "raise study_b.models.oracles.max_exhaustive_blocks or skip the check")
    best_cost, best_choice = np.inf, None
    weights = 1 << np.arange(model.n - 1, -1, -1)             # block 0 is the most significant bit
    for start in range(0, 1 << model.n, chunk):
        codes = np.arange(start, min(start + chunk, 1 << model.n))
        choices = (codes[:, None] & weights) > 0
        costs = model.costs(choices)
        k = int(np.argmin(costs))
        if costs[k] < best_cost:
            best_cost, best_choice = float(costs[k]), choices[k]
    return Decision(tuple(int(x) for x in best_choice), best_cost)


def all_choices(n: int):
    """Every choice for n blocks (for tests on small cost tables)."""
    return itertools.product((EAGER, COMPILED), repeat=n)


def choice_string(choice) -> str:
    """A choice as text for tables: one character per block, e for eager, c for compiled."""
    return "".join("c" if s == COMPILED else "e" for s in choice)


def parse_choice(text: str) -> tuple[int, ...]:
    if not text or set(text) - {"e", "c"}:
        raise OracleError(f"choice {text!r}: expected one character per block, e (eager) or c (compiled)")
    return tuple(COMPILED if ch == "c" else EAGER for ch in text)
