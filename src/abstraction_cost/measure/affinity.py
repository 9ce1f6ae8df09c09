"""A quiet host for timing jobs: each GPU slot's timing job runs on CPU cores that no other job of the run uses.

The cores this process may use are split once, the same way in every job of a run: GPU slot i's timing job gets
the i-th block of `per_slot` cores, and every other job (compiles, C++ builds, AOTInductor packages, summaries)
the cores after the last block, so that a compile beside a timing job does not take its cores, its caches or its
scheduler's attention. The split hands out whole physical cores: where the kernel numbers a core's hardware
threads apart (siblings 0 and 8 of 16), splitting the numbers in half would put a compile on the other thread of
every timing core. Where the machine has too few cores for that (fewer than two per slot and two for the rest),
nothing is pinned and the environment row says so.

    split = plan(os.sched_getaffinity(0), slots=2)      # Split(timing=[{0..7}, {8..15}], other={16..31})
    pin_timing(slot_index)   /   pin_other()            # at a job's start, before torch starts its threads
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MIN_CORES = 2        # the fewest logical CPUs a timing slot or the rest of the run may have
SHARE_TIMING = 0.5   # at most this share of the physical cores goes to the timing slots together
SYSFS_CPU = Path("/sys/devices/system/cpu")

_pinned: str = "not pinned"
_INITIAL = frozenset(os.sched_getaffinity(0))  # the job's cores before any pinning: every split starts from them


@dataclass(frozen=True)
class Split:
    timing: tuple[frozenset[int], ...]   # per GPU slot
    other: frozenset[int]


def _parse_list(text: str) -> frozenset[int]:
    """The kernel's CPU list format: '0,8' or '0-1' or '0-1,4'."""
    out = set()
    for part in text.strip().split(","):
        if part:
            first, _, last = part.partition("-")
            out.update(range(int(first), int(last or first) + 1))
    return frozenset(out)


def siblings(cpus, root: Path | None = None) -> dict[int, frozenset[int]]:
    """Each CPU's hardware threads on its physical core (itself alone where sysfs does not say)."""
    root = root or SYSFS_CPU
    out = {}
    for cpu in cpus:
        try:
            out[cpu] = _parse_list((root / f"cpu{cpu}/topology/thread_siblings_list").read_text()) | {cpu}
        except (OSError, ValueError):
            out[cpu] = frozenset({cpu})
    return out


def physical_cores(cpus, thread_siblings: dict[int, frozenset[int]]) -> list[frozenset[int]]:
    """`cpus` grouped by physical core, in order of each core's lowest CPU number."""
    cpus = set(cpus)
    return sorted({frozenset(thread_siblings.get(c, {c}) & cpus) for c in cpus}, key=min)


def plan(cpus, slots: int, thread_siblings: dict[int, frozenset[int]] | None = None) -> Split | None:
    """The split of `cpus` among `slots` timing slots and the rest, in whole physical cores (`thread_siblings`:
    each CPU's siblings, read from sysfs where not given); None where there are too few cores."""
    if slots < 1:
        return None
    cores = physical_cores(cpus, siblings(cpus) if thread_siblings is None else thread_siblings)
    per_slot = int(len(cores) * SHARE_TIMING) // slots
    timing = tuple(frozenset().union(*cores[i * per_slot:(i + 1) * per_slot]) for i in range(slots))
    other = frozenset().union(*cores[per_slot * slots:])
    if per_slot == 0 or min(len(t) for t in timing) < MIN_CORES or len(other) < MIN_CORES:
        return None
    return Split(timing, other)


def _set(cores: frozenset[int], what: str) -> None:
    global _pinned
    os.sched_setaffinity(0, cores)
    _pinned = f"{what}: {_ranges(cores)}"
    log.info("CPU affinity: %s", _pinned)


def pin_timing(slot_index: int, slots: int) -> None:
    """Pin this timing job (and the processes it starts) to its GPU slot's cores."""
    split = plan(_INITIAL, slots)
    if split is None or not 0 <= slot_index < slots:
        _note_unpinned(slots)
        return
    _set(split.timing[slot_index], f"timing slot {slot_index}")


def pin_other(slots: int) -> None:
    """Pin a job that times nothing to the cores no timing slot has."""
    split = plan(_INITIAL, slots)
    if split is None:
        _note_unpinned(slots)
        return
    _set(split.other, "no timing")


def _note_unpinned(slots: int) -> None:
    global _pinned
    _pinned = f"not pinned: {len(_INITIAL)} cores for {slots} timing slot(s)"


def _ranges(cores) -> str:
    """{0, 1, 2, 5} -> '0-2,5'"""
    out, run = [], []
    for c in sorted(cores):
        if run and c != run[-1] + 1:
            out.append(run)
            run = []
        run.append(c)
    if run:
        out.append(run)
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in out)


def _governor() -> str | None:
    try:
        return Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").read_text().strip()
    except OSError:
        return None


def environment_columns(when: str) -> dict:
    """The job's affinity, load average and CPU governor for its environment row; `when`: start or end."""
    columns = {f"load_avg_{when}": os.getloadavg()[0]}
    if when == "start":
        columns.update(cpu_affinity=f"{_pinned}; cores {_ranges(os.sched_getaffinity(0))}",
                       cpu_governor=_governor())
    return columns
