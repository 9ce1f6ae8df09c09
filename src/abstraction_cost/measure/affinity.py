"""A quiet host for timing jobs: each GPU slot's timing job runs on CPU cores that no other job of the run uses.

The cores this process may use are split once, the same way in every job of a run: GPU slot i's timing job gets
the i-th block of `per_slot` cores, and every other job (compiles, C++ builds, AOTInductor packages, summaries)
the cores after the last block, so that a compile beside a timing job does not take its cores, its caches or its
scheduler's attention. The split hands out whole physical cores: where the kernel numbers a core's hardware
threads apart (siblings 0 and 8 of 16), splitting the numbers in half would put a compile on the other thread of
every timing core. Where the machine has too few cores for that (fewer than two per slot and two for the rest),
nothing is pinned and the environment row says so. With a CPU slot (config gpus.cpu_beside: a timing job on the
CPU times beside the GPU slots' jobs instead of keeping the box to itself), the last half of the rest, at most a
GPU slot's share, is that job's, and the other jobs get the cores between.

    split = plan(os.sched_getaffinity(0), slots=2)      # Split(timing=[{0..7}, {8..15}], other={16..31})
    plan(cpus, slots=2, cpu_slot=True)                  # ... other={16..23}, cpu={24..31}
    pin_other()   ...   pin_timing(slot_index)          # a staged timing job, then the one with its slot
    pin_cpu(slots)                                      # a CPU timing job beside the GPU slots
    with turns_on_one_cpu(worker_pids) as turns:       # a timing job's workers take their turns on one CPU,
        turns.pick()  ...                               # before each turn the fastest of the slot's at the moment
    with loading(worker_pids): ...                      # they start and load on the slot's and the spare cores

A timing job's workers (one process per implementation or variant) take turns, and a turn's pair is fair only if
both sides meet the same host. On a VM a CPU runs at one of two speeds, 2x apart, switching every second or so and
differently per CPU (benchmarks/host_cores.py), so workers left to the scheduler time on different CPUs in
different states. For its turns and warm-ups the job therefore puts every worker's main thread (the one that
issues the work) on one CPU of its slot, and its own threads on the others. Before each turn it probes the slot's
CPUs (a few milliseconds) and moves the workers to the fastest: a state lasts longer than a turn, so a turn meets
the slow state less often than on a fixed CPU (benchmarks/turn_cpu.py), and a host-bound cell's median depends less
on the states its run happened to meet.

While a timing job's workers start and load (builds, compiles from the cache, output checks: nothing of the job is
timed, and its GPU waits), they may also run on the cores that no timing slot has (gpus.spread_loads, default off):
where more workers load at once than the slot has cores (the sweep's invocations loading together), that is room.
Another slot's timing job keeps its own cores; the builds on the spare cores share them. It does not shorten a load
that is one process's work: a vision job's (two workers an invocation, each building in one process) was no shorter
with it (docs/results/).
"""
from __future__ import annotations

import logging
import os
import statistics
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)

MIN_CORES = 2        # the fewest logical CPUs a timing slot or the rest of the run may have
SHARE_TIMING = 0.5   # at most this share of the physical cores goes to the timing slots together
SYSFS_CPU = Path("/sys/devices/system/cpu")
PROBE_OPS = 300      # one block of the host probe's op per candidate CPU before a turn: under a millisecond each

_pinned: str = "not pinned"
_cores: frozenset[int] | None = None   # where _set put this job
_left: frozenset[int] = frozenset()   # a timing job's cores once it gives its slot back (leave_slot)
_spare: frozenset[int] = frozenset()   # a timing job's cores for its workers' loads beyond its slot's (spread_loads)
_turns_logged = False
_turn_probes: list[float] = []   # the picked CPU's probe (µs per op) at each of this job's probed turns
_INITIAL = frozenset(os.sched_getaffinity(0))  # the job's cores before any pinning: every split starts from them


@dataclass(frozen=True)
class Split:
    timing: tuple[frozenset[int], ...]   # per GPU slot
    other: frozenset[int]
    cpu: frozenset[int] = frozenset()    # the CPU slot, where one was asked for


def parse_cpu_list(text: str) -> frozenset[int]:
    """The kernel's CPU list format, as sysfs and taskset write it: '0,8' or '0-1' or '0-1,4'."""
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
            out[cpu] = parse_cpu_list((root / f"cpu{cpu}/topology/thread_siblings_list").read_text()) | {cpu}
        except (OSError, ValueError):
            out[cpu] = frozenset({cpu})
    return out


def physical_cores(cpus, thread_siblings: dict[int, frozenset[int]]) -> list[frozenset[int]]:
    """`cpus` grouped by physical core, in order of each core's lowest CPU number."""
    cpus = set(cpus)
    return sorted({frozenset(thread_siblings.get(c, {c}) & cpus) for c in cpus}, key=min)


def plan(cpus, slots: int, thread_siblings: dict[int, frozenset[int]] | None = None,
         cpu_slot: bool = False) -> Split | None:
    """The split of `cpus` among `slots` timing slots, with cpu_slot a CPU slot, and the rest, in whole physical
    cores (`thread_siblings`: each CPU's siblings, read from sysfs where not given); None where there are too few
    cores. Every job of a run must split with the same arguments (gpu_slots passes them from the config)."""
    if slots < 1:
        return None
    cores = physical_cores(cpus, siblings(cpus) if thread_siblings is None else thread_siblings)
    per_slot = int(len(cores) * SHARE_TIMING) // slots
    timing = tuple(frozenset().union(*cores[i * per_slot:(i + 1) * per_slot]) for i in range(slots))
    rest = cores[per_slot * slots:]
    n_cpu = min(per_slot, len(rest) // 2) if cpu_slot else 0
    other, cpu = frozenset().union(*rest[:len(rest) - n_cpu]), frozenset().union(*rest[len(rest) - n_cpu:])
    if per_slot == 0 or min(len(t) for t in timing) < MIN_CORES or len(other) < MIN_CORES or (
            cpu_slot and len(cpu) < MIN_CORES):
        return None
    return Split(timing, other, cpu)


def _set(cores: frozenset[int], what: str) -> None:
    """Every thread of this process onto `cores`: a staged timing job's imports may have started threads before
    it took its slot (gpu_slots.stage), and sched_setaffinity moves one thread."""
    global _pinned, _cores
    os.sched_setaffinity(0, cores)
    for tid in (int(t) for t in os.listdir("/proc/self/task")):
        _try_set(tid, cores)
    _pinned, _cores = f"{what}: {_ranges(cores)}", frozenset(cores)
    log.info("CPU affinity: %s", _pinned)


def pin_timing(slot_index: int, slots: int, cpu_slot: bool = False, spread_loads: bool = False) -> None:
    """Pin this timing job (and the processes it starts) to its GPU slot's cores; with `spread_loads` its workers
    start and load on the cores no timing slot has as well (loading)."""
    global _spare, _left
    split = plan(_INITIAL, slots, cpu_slot=cpu_slot)
    if split is None or not 0 <= slot_index < slots:
        _note_unpinned(slots)
        return
    _set(split.timing[slot_index], f"timing slot {slot_index}")
    _spare = split.other if spread_loads else frozenset()
    _left = split.other


def leave_slot() -> None:
    """A timing job that gave its GPU slot back (gpu_slots.release): it and the processes it started onto the
    cores no timing slot has, so that its exit runs beside the next job timing on the slot, not on its cores."""
    if not _left:
        return
    _set(_left, "no timing (slot given back)")
    for tid in _tasks(os.getpid()):
        _try_set(tid, _left)


def _probe_op_us() -> float:
    from abstraction_cost.measure import host_speed   # imports torch, which jobs that time nothing need not
    return host_speed.op_us(PROBE_OPS, 1)


def fastest_cpu(candidates, probe: Callable[[], float]) -> tuple[int, float]:
    """The candidate where `probe` (µs per op where the calling thread runs) is fastest, and its time; the calling
    thread is left on the last candidate probed."""
    speeds = {}
    for cpu in candidates:
        os.sched_setaffinity(0, {cpu})
        speeds[cpu] = probe()
    best = min(speeds, key=speeds.get)
    return best, speeds[best]


@dataclass
class Turns:
    """Where a timing job's workers take their turns: `pick()` probes each candidate CPU with this process's main
    thread (`probe`: µs per op where it runs), puts the workers' main threads on the fastest (`move`) and every
    thread of this process on the job's other cores, and returns that CPU; None where nothing moves. `cpu` and
    `op_us` are where the turn goes and that CPU's probe (None where it was not probed)."""
    pids: list[int]
    cores: frozenset[int] = frozenset()
    probe: Callable[[], float] = _probe_op_us
    cpu: int | None = None
    op_us: float | None = None

    @property
    def candidates(self) -> list[int]:
        """The job's cores but CPU 0, where a machine's housekeeping and interrupts tend to land, while there is
        another."""
        return sorted(self.cores - {0} or self.cores)

    def pick(self) -> int | None:
        if not self.cores:
            return None
        candidates = self.candidates
        if len(candidates) == 1:
            return self.move(candidates[0])
        fastest, self.op_us = fastest_cpu(candidates, self.probe)
        _turn_probes.append(self.op_us)
        return self.move(fastest)

    def move(self, cpu: int) -> int:
        self.cpu = cpu
        self.pids = [pid for pid in self.pids if _try_set(pid, {cpu})]
        for tid in (int(t) for t in os.listdir("/proc/self/task")):
            if tid not in self.pids:   # a thread of this process that times (Study B's blocks) stays on the CPU
                _try_set(tid, self.cores - {cpu})
        return cpu


@contextmanager
def turns_on_one_cpu(pids, probe: Callable[[], float] = _probe_op_us):
    """Within the block, each of `pids`' main thread on one CPU of this timing job's cores, the last candidate on
    entry (for warm-ups) and the fastest at the moment from each `pick()` (before each turn), and every other thread
    of this process on the rest; all back to the job's cores after. A pid is a worker's, or the native id of this
    process's own thread where the job times in it (Study B's blocks: threading.get_native_id()). Nothing moves
    where there are no `pids`, the job is not pinned to a timing slot (a CPU timing job's workers use every core)
    or has a single CPU. Yields the Turns."""
    global _turns_logged
    cores = frozenset(os.sched_getaffinity(0))
    if not pids or not _pinned.startswith("timing slot") or len(cores) < 2:
        yield Turns(list(pids))
        return
    turns = Turns(list(pids), cores, probe)
    turns.move(turns.candidates[-1])
    if not _turns_logged:   # once per job: the candidates are the same every time
        log.info("turns on the fastest of CPUs %s, probed before each turn (%d timing processes or threads); this "
                 "job's other threads on the rest", _ranges(turns.candidates), len(turns.pids))
        _turns_logged = True
    own = [int(t) for t in os.listdir("/proc/self/task")]
    try:
        yield turns
    finally:   # threads started meanwhile (a worker started again after a death) inherited the rest: back too
        for tid in set(own + list(pids)) | {int(t) for t in os.listdir("/proc/self/task")}:
            _try_set(tid, cores)


def loading_cores() -> frozenset[int]:
    """Where this job's workers start and load: its slot's cores and the spare ones (pin_timing's spread_loads)."""
    return job_cores() | _spare


def _tasks(pid: int) -> list[int]:
    """Every thread of process `pid` and of the processes it started (a compile pool), those still there."""
    out, todo = [], [pid]
    while todo:
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{todo.pop()}/task")]
        except OSError:   # ended
            continue
        for tid in tids:
            out.append(tid)
            try:
                todo += [int(c) for c in Path(f"/proc/{tid}/task/{tid}/children").read_text().split()]
            except OSError:
                pass
    return out


@contextmanager
def loading(pids):
    """Within the block, every thread of `pids` (workers, and what they started) on loading_cores(), then back on
    the job's cores, threads started meanwhile too. Nothing moves where the job has no spare cores."""
    wide = loading_cores()
    if not pids or wide == job_cores():
        yield
        return
    for pid in pids:
        for tid in _tasks(pid):
            _try_set(tid, wide)
    try:
        yield
    finally:
        for pid in pids:
            for tid in _tasks(pid):
                _try_set(tid, job_cores())


def job_cores() -> frozenset[int]:
    """The cores this job was pinned to (its first ones where it was not): those of the processes it starts."""
    return _cores if _cores is not None else _INITIAL


def _try_set(pid: int, cores) -> bool:
    """sched_setaffinity of one thread; False where it has ended."""
    try:
        os.sched_setaffinity(pid, cores)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def pin_other(slots: int, cpu_slot: bool = False) -> None:
    """Pin a job that times nothing to the cores no timing slot has."""
    split = plan(_INITIAL, slots, cpu_slot=cpu_slot)
    if split is None:
        _note_unpinned(slots)
        return
    _set(split.other, "no timing")


def pin_cpu(slots: int) -> None:
    """Pin a CPU timing job that times beside `slots` GPU slots (config gpus.cpu_beside) to the CPU slot's cores."""
    split = plan(_INITIAL, slots, cpu_slot=True)
    if split is None:
        _note_unpinned(slots)
        return
    _set(split.cpu, "CPU timing slot")


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
    """The job's affinity, load average and CPU governor for its environment row; `when`: start or end. At the
    end also its probed turns: how many, and the median of the picked CPUs' probes (null where none), the host's
    speed where the turns' work was issued, beside the start's and end's probes of the job's whole cores."""
    columns = {f"load_avg_{when}": os.getloadavg()[0]}
    if when == "start":
        spread = f"; loads on {_ranges(loading_cores())}" if _spare else ""
        columns.update(cpu_affinity=f"{_pinned}{spread}; cores {_ranges(os.sched_getaffinity(0))}",
                       cpu_governor=_governor())
    else:
        columns.update(probed_turns=len(_turn_probes),
                       turn_host_op_us=statistics.median(_turn_probes) if _turn_probes else None)
    return columns
