"""How a finding sentence decides what its numbers say: one of three verdicts, never more than the intervals allow.

A ratio of two medians is a measured difference only where its interval excludes 1; otherwise the sentence says
there is no measurable difference at this precision. A study's claim "holds" only where every number the sentence
quotes supports it, "does not hold" where one contradicts it, and has no measurable difference where the rest
cannot be told apart at this precision. A claim about a band rather than about 1 (a ratio too small to matter)
cannot be told at this precision where the interval straddles the band's edge: it may differ from 1 measurably.

Two medians measured in separate processes (Study A's implementations) are not paired, so the ratio's interval is
the conservative quotient of their intervals: [num_low / den_high, num_high / den_low]. Two 95% intervals give a
ratio interval of at least 95% coverage.
"""
from __future__ import annotations

import math
import re
from typing import Iterable

HOLDS = "holds"
DOES_NOT_HOLD = "does not hold"
NO_DIFFERENCE = "no measurable difference at this precision"
UNDECIDED = "cannot be told at this precision"
VERDICTS = (HOLDS, DOES_NOT_HOLD, NO_DIFFERENCE, UNDECIDED)


def _finite(*values) -> bool:
    return all(v is not None and isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def ratio_interval(num, num_low, num_high, den, den_low, den_high) -> tuple[float | None, float | None, float | None]:
    """num / den and its conservative interval; the interval is (None, None) where either side has none."""
    if not _finite(num, den) or den <= 0:
        return None, None, None
    ratio = num / den
    if not _finite(num_low, num_high, den_low, den_high) or den_low <= 0 or den_high <= 0:
        return ratio, None, None
    return ratio, num_low / den_high, num_high / den_low


def direction(low, high) -> int:
    """+1: the interval lies above 1; -1: below 1; 0: it holds 1, or there is no interval."""
    if not _finite(low, high):
        return 0
    return 1 if low > 1 else -1 if high < 1 else 0


def ratio_text(ratio, low, high, digits: int = 2) -> str:
    """'1.23× [1.10–1.40]', or '1.23× (no interval)'."""
    if ratio is None:
        return "not measured"
    if not _finite(low, high):
        return f"{ratio:.{digits}f}× (no interval)"
    return f"{ratio:.{digits}f}× [{low:.{digits}f}–{high:.{digits}f}]"


def combine(verdicts: Iterable[str]) -> str:
    """The claim as a whole: does not hold if one part contradicts it, holds if every part supports it, else no
    measurable difference (some parts cannot be decided at this precision, none contradicts)."""
    verdicts = list(verdicts)
    if not verdicts:
        return NO_DIFFERENCE
    if DOES_NOT_HOLD in verdicts:
        return DOES_NOT_HOLD
    return HOLDS if all(v == HOLDS for v in verdicts) else NO_DIFFERENCE


def at_least(ratio, low, high, threshold: float) -> str:
    """The claim "num is slower than den by at least `threshold`" from num/den: holds where the interval lies above
    1 and the ratio reaches the threshold, no measurable difference where the interval holds 1 (or is missing),
    does not hold where it lies below 1 or the measured ratio falls short."""
    side = direction(low, high)
    if side == 0:
        return NO_DIFFERENCE
    return HOLDS if side > 0 and ratio >= threshold else DOES_NOT_HOLD


def within_band(low, high, bound: float) -> str:
    """The claim "the ratio lies within [1/bound, bound]" (too small to matter): holds where the interval lies inside
    the band, does not hold where it lies wholly above or below it, cannot be told where it straddles an edge (or is
    missing)."""
    if not _finite(low, high):
        return UNDECIDED
    if low > bound or high < 1 / bound:
        return DOES_NOT_HOLD
    return HOLDS if low >= 1 / bound and high <= bound else UNDECIDED


def separated(first: tuple, second: tuple) -> int:
    """Two (ratio, low, high): +1 if the first's interval lies wholly above the second's, -1 below, 0 overlapping
    or missing."""
    _, lo1, hi1 = first
    _, lo2, hi2 = second
    if not _finite(lo1, hi1, lo2, hi2):
        return 0
    return 1 if lo1 > hi2 else -1 if hi1 < lo2 else 0


def within(ratio: float, tolerance: float) -> str:
    """An exact ratio (no sampling error, e.g. an allocator's peak): 'same' within ±tolerance, else 'lower' or
    'higher'."""
    return "same" if abs(ratio - 1) <= tolerance else "lower" if ratio < 1 else "higher"


def grid_size(grid: str | None) -> int | None:
    """Threads blocks in a launch grid written '(x,y,z)'."""
    numbers = [int(n) for n in re.findall(r"\d+", grid or "")]
    return math.prod(numbers) if numbers else None
