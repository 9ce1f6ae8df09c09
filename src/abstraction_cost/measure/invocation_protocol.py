"""The invocation protocol that Study A's sweep and backend comparison and Study B's vision models share
(docs/measurement.md): worker processes started afresh for each invocation, at least `invocations` of them and up
to `max_invocations` while some median is not pinned within `precision` (the t-interval's relative half width);
in each invocation, turns of `blocks` blocks of calls filling about `block_ms`, after a steady-state warm-up of at
most `warmup_max` calls, and in the first one a profiled pass of `profile_calls` calls (0: none). With
`prepare_together` (default on) the first `invocations` start their workers and load at once, and are then timed one
after another; where a worker compiles cold as it loads, the first loads alone before the others
(InvocationProtocol.batch).

Each study's Protocol adds its own keys and defaults (study_a.sweep.cells.Protocol, study_b.models.protocol.Protocol);
the shared keys' fields, their checks and the messages that name the key at fault are here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

Rule = Callable[[object], "str | None"]   # what a value should be, or None where it is fine


def count(least: int) -> Rule:
    return lambda v: None if isinstance(v, int) and not isinstance(v, bool) and v >= least else f"an integer >= {least}"


def positive(what: str) -> Rule:
    return lambda v: None if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else f"a positive {what}"


def flag() -> Rule:
    return lambda v: None if isinstance(v, bool) else "true or false"


def one_of(choices: tuple[str, ...]) -> Rule:
    return lambda v: None if v in choices else f"one of {list(choices)}"


SHARED_RULES: dict[str, Rule] = {
    "invocations": count(1), "max_invocations": count(1), "precision": positive("relative half width (0.05: ±5%)"),
    "blocks": count(1), "block_ms": positive("number of milliseconds"), "warmup_max": count(0),
    "profile_calls": count(0), "prepare_together": flag()}


def check(given: dict, section: str, own: dict[str, Rule], error: type[Exception] = ValueError) -> None:
    """Each key of a protocol mapping (config section `section`, e.g. 'study_a.sweep.protocol'): a shared key by its
    rule, the study's own by `own`; an unknown key or a value out of its rule raises `error` naming the key."""
    rules = {**own, **SHARED_RULES}
    for key, value in given.items():
        name = f"config key '{section}.{key}'"
        if key not in rules:
            raise error(f"{name}: unknown key; known: {', '.join(rules)}")
        if (should_be := rules[key](value)) is not None:
            raise error(f"{name}: {value!r} is not {should_be}")


def settings(defaults: dict, given: dict | None) -> dict:
    """The protocol's values: the study's defaults under the config's; max_invocations never below invocations, the
    numbers (precision, block_ms) floats however the config wrote them."""
    p = {**defaults, **(given or {})}
    return {**p, "max_invocations": max(p["max_invocations"], p["invocations"]), "precision": float(p["precision"]),
            "block_ms": float(p["block_ms"])}


@dataclass(frozen=True, kw_only=True)
class InvocationProtocol:
    invocations: int
    max_invocations: int
    precision: float
    blocks: int
    block_ms: float
    warmup_max: int
    profile_calls: int = 0   # the profiled pass's calls, in the first invocation after its turns; 0: none
    prepare_together: bool = True

    def batch(self, inv: int, *, first_alone: bool) -> list[int]:
        """The invocations whose workers start and prepare at once with `inv` (prepare_together): the first
        `invocations` together, their loads overlapping while nothing is timed, then timed one invocation after
        another; the extra ones one at a time, each decided by the invocations before it. With `first_alone` (a
        worker compiles cold as it loads: its build fills the cache the later invocations hit, and is the build time
        the tables keep, which compiles beside it would slow) the first alone, then the rest of the first
        `invocations` together."""
        if not self.prepare_together or inv >= self.invocations or (first_alone and inv == 0):
            return [inv]
        return list(range(inv, self.invocations))
