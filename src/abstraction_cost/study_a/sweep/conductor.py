"""Study A's sweep, interleaved: every implementation of one numerics measured by one job, in turns.

The host's speed shifts on a scale of seconds (a host-bound cell's time steps between levels that each last
1-5 s), so implementations measured one after another, each in its own process, meet different hosts, and one
process's calls describe that process at that moment only. The conductor therefore
- runs every implementation as a long-lived worker process (the C++ programs with --serve, Python ones as
  sweep_worker), started together, so their start-up overlaps and is paid once per invocation;
- walks the cells in the serial walk's order; at each cell it has every worker load it at once (build, output
  check: nothing timed, so the slowest load is paid and not the sum), except that a worker which times candidate
  algorithms as it loads (cuDNN's benchmark mode or cudnnFind, Inductor's max-autotune:
  implementations.times_algorithms) loads after them, by itself, so that its choice is made on a GPU it has to
  itself, as a user's process would; then the workers warm up to a steady state one at a time,
  then gives them `blocks` turns each, in rotating order, of calls filling about `block_ms`: every slow period of
  the host falls on all implementations alike;
- repeats the walk in `invocations` sets of fresh processes, together (`prepare_together`, default on): they start
  at once and at each cell all load it at once, then take their turns one invocation after another (only the first
  has the profiled pass, after its turns), so the loads of fresh processes are paid once rather than per invocation
  and nothing is timed while any worker loads; where an implementation compiles cold as it loads (the sweep's
  torch.compile entries without their compile warm-up: compile_warm_up.py) the first walks alone, since its
  builds are the table's build_s and fill the cache the others hit;
- then, up to `max_invocations`, walks again the cells
  whose invocations do not yet pin some implementation's time within `precision` (the t-interval's relative half
  width): the device-bound cells settle in a few invocations, the host-bound ones take more (Kalibera & Jones'
  fewest invocations that reach the precision); a row's time is the median over invocations of each one's
  median, its interval measure/statistics.hierarchical_interval's;
- keeps every (invocation, implementation, cell) record as it arrives (sweep_store.CellStore), so a killed job
  resumes at the first one missing.
Cells too large to hold every implementation's state at once (batch × resolution² above interleave_max_pixels:
device-bound, where turns matter least) are measured one implementation at a time, each released after.
A worker that dies makes its cell an `error` row with its exit status and is started again for the next cell,
told its ooms (--oom-at) so the skip rule holds.
"""
from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Callable

from ...faults import kill_job
from ...measure import affinity, profiled, worker_phases
from ...measure.statistics import hierarchical_interval, median, relative_half_width
from ...programs.workers import Worker, WorkerDied
from .cells import Cell, OomTracker, Protocol, SweepSettings, kills
from .store import INTERRUPTIONS

log = logging.getLogger(__name__)


class Store:
    """Records kept as they arrive, one per (invocation, implementation, cell): a CellStore's cells numbered
    (invocation × implementations + implementation) × cells + cell."""

    def __init__(self, cell_store, implementations: list[str], cells: int):
        self.cell_store, self.implementations, self.cells = cell_store, implementations, cells
        self.kept = {}
        if cell_store is not None:
            for key, row in cell_store.rows().items():
                self.kept[self._unkey(key)] = row["record"]
        self.kill = kills()

    def _key(self, inv: int, impl: str, cell: int) -> int:
        return (inv * len(self.implementations) + self.implementations.index(impl)) * self.cells + cell

    def _unkey(self, key: int) -> tuple[int, str, int]:
        q, cell = divmod(key, self.cells)
        inv, i = divmod(q, len(self.implementations))
        return inv, self.implementations[i], cell

    def get(self, inv: int, impl: str, cell: int) -> dict | None:
        return self.kept.get((inv, impl, cell))

    def keep(self, inv: int, impl: str, record: dict) -> None:
        self.kept[(inv, impl, record["cell"])] = record
        if self.cell_store is not None and record.get("exit_status") not in INTERRUPTIONS:
            self.cell_store.keep({"cell": self._key(inv, impl, record["cell"]), "record": record})
        if record["cell"] in self.kill:
            kill_job()


# a worker's command line for an invocation, told the ooms its earlier processes met (R:B:T,...)
CommandFor = Callable[[str, str], list[str]]


def conduct(implementations: list[str], command_for: CommandFor, cells: list[Cell], settings: SweepSettings,
            protocol: Protocol, store: Store, alone: frozenset[str] = frozenset(),
            first_alone: bool = False) -> list[dict]:
    """Every (invocation, implementation, cell) record measured, each with its `invocation` and `implementation`;
    `block` records are gathered into each cell record's `blocks` ([[calls' ms] per turn]) and `turns`. `cells`
    may be a shard of the grid (whole resolutions, indices the grid's); the workers know the whole grid.
    Invocations that protocol.batch puts together walk the cells together (_invocations); `first_alone` (some
    implementation compiles cold as it loads: implementations.compiles) keeps the first invocation's walk alone. The
    implementations in `alone` time candidate algorithms as they load (implementations.times_algorithms): each loads
    a cell alone."""
    inv = 0
    while inv < protocol.max_invocations:
        batch = protocol.batch(inv, first_alone=first_alone)
        due = cells if inv < protocol.invocations else imprecise(store, implementations, cells, inv,
                                                                 protocol.precision)
        if not due:
            break
        plan = {}
        for i in batch:
            missing = [impl for impl in implementations if any(store.get(i, impl, c.index) is None for c in due)
                       or (i == 0 and protocol.profile_calls > 0 and _unprofiled(store, impl, due))]
            if missing:
                plan[i] = missing
        if plan:
            log.info("%s: %d cells (%s)", _named(list(plan)), len(due), ",".join(str(c.index) for c in due))
            _invocations(plan, command_for, cells, due, settings, protocol, store, alone)
        inv += len(batch)
    return [{**record, "invocation": inv, "implementation": impl}
            for inv in range(protocol.max_invocations) for c in cells for impl in implementations
            if (record := store.get(inv, impl, c.index)) is not None]


def _named(invs: list[int]) -> str:
    return f"invocation {invs[0]}" if len(invs) == 1 else f"invocations {', '.join(map(str, invs))}"


def imprecise(store: Store, implementations: list[str], cells: list[Cell], before: int,
              precision: float) -> list[Cell]:
    """The cells where some implementation's ok invocations (of the first `before`) do not pin its median time
    within `precision`; every implementation measures them again, so that their turns stay paired."""
    due = []
    for cell in cells:
        for impl in implementations:
            medians = [median(r["times_ms"]) for inv in range(before)
                       if (r := store.get(inv, impl, cell.index)) is not None and r["status"] == "ok"
                       and r.get("times_ms")]
            if medians and relative_half_width(medians) > precision:
                due.append(cell)
                break
    return due


class Phases:
    """Where an invocation's wall time went (workers' start-up, each worker's preparing of cells, turns, ends, the
    profiled pass), logged when it ends: what the job spends outside its timed turns, per worker."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.by_worker: dict[str, dict[str, float]] = {"start-up": {}, "loading": {}, "preparing": {}}

    def add(self, phase: str, seconds: float, worker: str | None = None) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds
        if worker is not None:
            self.worker(phase, worker, seconds)

    def worker(self, phase: str, worker: str, seconds: float) -> None:
        """One worker's share of a phase; for `start-up` and `loading`, its own time (the workers start and load
        at once, so the phase's wall time is about the slowest one's)."""
        self.by_worker[phase][worker] = self.by_worker[phase].get(worker, 0.0) + seconds

    def summary(self) -> str:
        parts = [f"{phase} {s:.1f} s" for phase, s in self.seconds.items()]
        for phase, workers in self.by_worker.items():
            slowest = sorted(workers.items(), key=lambda kv: -kv[1])[:3]
            if slowest:
                parts.append(f"{phase} by worker: " + ", ".join(f"{w} {s:.1f} s" for w, s in slowest))
        return ", ".join(parts)


class _Set:
    """One invocation's workers, one per implementation: launched afresh for the invocation, and again for the
    next cell after one dies; each with its own oom tracker (the skip rule holds per process lineage)."""

    def __init__(self, inv: int, implementations: list[str], command_for: CommandFor, by_index: dict[int, Cell],
                 due: list[Cell], store: Store):
        self.inv, self.implementations, self.command_for, self.due, self.store = (inv, implementations, command_for,
                                                                                   due, store)
        self.trackers = {impl: OomTracker() for impl in implementations}
        for (i, impl, index), record in list(store.kept.items()):
            if i == inv and impl in self.trackers and index in by_index and record["status"] == "oom" and not str(
                    record.get("message")).startswith("skipped:"):
                self.trackers[impl].add(by_index[index])
        self.launched_at = {impl: time.monotonic() for impl in implementations}
        self.launched = {impl: self._launch(impl) for impl in implementations}
        self.workers: dict[str, Worker | None] = {}
        self.up_s: dict[str, dict] = {}   # each worker's start: its seconds to sweep_start, a Python one's parts

    def _launch(self, impl: str) -> Worker:
        return Worker(impl, self.command_for(impl, self.trackers[impl].flag()))

    def _up(self, impl: str, worker: Worker) -> Worker | None:
        """The worker once it says it is up; None, with every cell of it failed, if it died before."""
        try:
            record = worker.ask(None, "sweep_start")
            self.up_s[impl] = start_parts(record, self.launched_at[impl])
            return worker
        except WorkerDied as died:  # it never reached the cells: each of them fails the same way
            for cell in self.due:
                if self.store.get(self.inv, impl, cell.index) is None:
                    self.store.keep(self.inv, impl, _failed(cell, died))
            return None

    def up(self) -> None:
        self.workers = {impl: self._up(impl, worker) for impl, worker in self.launched.items()}

    def start(self, impl: str) -> Worker | None:
        self.launched_at[impl] = time.monotonic()
        return self._up(impl, self._launch(impl))

    def todo(self, cell: Cell) -> list[str]:
        return [impl for impl in self.implementations
                if self.workers.get(impl) is not None and self.store.get(self.inv, impl, cell.index) is None]

    def died(self, cell: Cell, impl: str, err: WorkerDied) -> None:
        log.warning("%s died in cell %d (invocation %d): %s; starting it again for the next cell", impl, cell.index,
                    self.inv, err.message)
        self.store.keep(self.inv, impl, {**_failed(cell, err), "exit_status": err.returncode})
        self.workers[impl] = self.start(impl)

    def final(self, cell: Cell, impl: str, record: dict) -> None:
        """A record that ends the cell for this worker untimed (skipped, out of memory, failed or wrong: at its load,
        its warm-up or a turn), kept; an oom that was no skip joins the tracker."""
        if record["status"] == "oom" and not str(record.get("message")).startswith("skipped:"):
            self.trackers[impl].add(cell)
        self.store.keep(self.inv, impl, record)

    def close(self) -> None:
        for worker in {**self.launched, **self.workers}.values():
            if worker is not None:
                worker.close()


def _invocations(plan: dict[int, list[str]], command_for: CommandFor, cells: list[Cell], due: list[Cell],
                 settings: SweepSettings, protocol: Protocol, store: Store, alone: frozenset[str]) -> None:
    """The invocations of `plan` (invocation -> its implementations still to measure) walk the due cells together:
    every worker of every invocation starts at once, and at each cell they all load it at once (nothing is timed
    meanwhile); then each invocation's workers warm up, take their turns and end the cell, one invocation after
    another, the others' workers waiting idle with the cell loaded. A cell that one set of workers may hold but not
    every set (Protocol.together) is walked one invocation at a time, each set's workers releasing it after their
    turns; cells too large to hold every implementation at once are measured one worker at a time, invocation by
    invocation."""
    phases, name = Phases(), _named(list(plan))
    by_index = {c.index: c for c in cells}   # a shard's cells keep the whole grid's indices (sweep_shards.py)
    started = time.perf_counter()
    sets: list[_Set] = []
    try:
        sets.extend(_Set(inv, impls, command_for, by_index, due, store) for inv, impls in plan.items())  # launched
        with affinity.loading([w.proc.pid for s in sets for w in s.launched.values()]):
            for s in sets:   # before any is waited for: their start-ups overlap
                s.up()
        phases.add("start-up", time.perf_counter() - started)
        log.info("%s: %d workers up in %.1f s", name,
                 sum(w is not None for s in sets for w in s.workers.values()), time.perf_counter() - started)
        for s in sets:
            for impl, parts in s.up_s.items():
                phases.worker("start-up", impl, parts["up_s"])
        log_slowest_start(name, [(impl, parts) for s in sets for impl, parts in s.up_s.items()])
        for cell in due:
            if protocol.together(cell):
                # every invocation's workers hold the cell at once where the memory of one set may hold it as many
                # times; otherwise one invocation at a time, each releasing it before the next loads it
                batches = [sets] if protocol.together(cell, len(sets)) else [[s] for s in sets]
                for walking in batches:
                    groups = [(s, s.todo(cell)) for s in walking]
                    loaded = _load([(s, group) for s, group in groups if len(group) > 1], cell, phases, alone)
                    for s, group in groups:
                        _measure(s, loaded.get(s.inv, group), cell, settings, protocol,
                                 release=len(batches) > 1, loaded=len(group) > 1, phases=phases)
            else:
                for s in sets:
                    for impl in s.todo(cell):
                        _measure(s, [impl], cell, settings, protocol, release=True, loaded=False, phases=phases)
        for s in sets:
            if s.inv == 0 and protocol.profile_calls > 0:
                profiling = time.perf_counter()
                _profile_walk(s.inv, s.workers, s.start, due, protocol, store)
                phases.add("profiled pass", time.perf_counter() - profiling)
    finally:
        for s in sets:
            s.close()
        log.info("%s: %.1f s: %s", name, time.perf_counter() - started, phases.summary())
        worker_phases.add(phases.seconds.get("start-up", 0.0), phases.seconds.get("loading", 0.0))


def start_parts(record: dict, launched_at: float) -> dict:
    """A worker's start from its launch (time.monotonic()) to its sweep_start record: `up_s` in all; a Python
    worker's record splits it (worker.main's `up`: to its main, the fork or interpreter and imports; its inputs;
    the CUDA context; the model's build) and says when it was up. The workers are read one after another, so a
    worker without that stamp (a C++ one) is up when it is read: no sooner than the workers read before it."""
    up = record.get("up")
    if not up:
        return {"up_s": time.monotonic() - launched_at}
    return {"up_s": up["ready_monotonic_s"] - launched_at, "imports_s": up["entered_monotonic_s"] - launched_at,
            **{k: up[k] for k in ("inputs_s", "cuda_s", "model_s")}}


def log_slowest_start(name: str, started: list[tuple[str, dict]]) -> None:
    """The slowest worker's start, and where the slowest Python worker's went: what a start before the GPU slot was
    taken could hide (the imports, the inputs) and what it could not (the CUDA context and the model on the GPU)."""
    if not started:
        return
    impl, parts = max(started, key=lambda ip: ip[1]["up_s"])
    line = f"{name}: slowest start {impl} {parts['up_s']:.1f} s"
    python = [(i, p) for i, p in started if "imports_s" in p]
    if python:
        impl, p = max(python, key=lambda ip: ip[1]["up_s"])
        line += (f"; slowest Python worker {impl} {p['up_s']:.1f} s: to its main {p['imports_s']:.1f} s, inputs "
                 f"{p['inputs_s']:.1f} s, CUDA context {p['cuda_s']:.1f} s, model {p['model_s']:.1f} s")
    log.info(line)


def _load(groups: list[tuple[_Set, list[str]]], cell: Cell, phases: Phases,
          alone: frozenset[str] = frozenset()) -> dict[int, list[str]]:
    """Every worker of `groups` (an invocation's workers, each group of two or more) loads the cell at once (builds,
    compiles, output checks: nothing is timed), so the slowest load is paid, not their sum; then each worker of
    `alone` loads it by itself, no other worker running on the GPU while it times its candidate algorithms. Each
    invocation's group less the workers that died or ended the cell in it, in the group's order."""
    if not groups:
        return {}
    loading = time.perf_counter()
    together = [(s, impl) for s, group in groups for impl in group if impl not in alone]
    with affinity.loading([s.workers[impl].proc.pid for s, group in groups for impl in group]):
        for s, impl in together:
            s.workers[impl].send(f"load {cell.index}")
        kept = {(s.inv, impl) for s, impl in together if _loaded(s, impl, cell, phases)}
        for s, impl in [(s, impl) for s, group in groups for impl in group if impl in alone]:
            s.workers[impl].send(f"load {cell.index}")
            if _loaded(s, impl, cell, phases):
                kept.add((s.inv, impl))
    out = {s.inv: [impl for impl in group if (s.inv, impl) in kept] for s, group in groups}
    phases.add("loading", time.perf_counter() - loading)
    return out


def _loaded(s: _Set, impl: str, cell: Cell, phases: Phases) -> bool:
    """Whether `impl`'s worker in `s` answered that it loaded the cell (not died, not ended the cell)."""
    try:
        record = s.workers[impl].ask(None, "cell_loaded", "cell")
    except WorkerDied as err:
        s.died(cell, impl, err)
        return False
    if record["kind"] == "cell":
        s.final(cell, impl, record)
        return False
    # a C++ worker's prepare_s is its whole load; a Python worker's excludes its model's build
    phases.worker("loading", impl, (record.get("prepare_s") or 0.0) + (record.get("build_s") or 0.0))
    return True


def _unprofiled(store: Store, impl: str, cells: list[Cell]) -> bool:
    return any((r := store.get(0, impl, c.index)) is not None and r["status"] == "ok" and "profile" not in r
               for c in cells)


def _profile_walk(inv: int, workers: dict, start, cells: list[Cell], protocol: Protocol, store: Store) -> None:
    """The profiled pass of every cell the invocation measured, walked again once all of its timed turns are done:
    a process that has run the profiler stays slower (eager by a fifth at batch 8: CUPTI's callbacks stay
    registered), so no timed call of a worker may follow its profiled pass. Each pass is kept, with its kernel
    groups, in its cell's record; a worker that dies in it is started again for the next cell."""
    for cell in cells:
        for impl in list(workers):
            record = store.get(inv, impl, cell.index)
            if workers[impl] is None or record is None or record["status"] != "ok" or "profile" in record:
                continue
            try:
                ready = workers[impl].ask(f"cell {cell.index}", "ready", "cell")
                if ready["kind"] == "cell":   # it could not prepare the cell again (out of memory, say)
                    profile = {"status": ready["status"], "message": f"not profiled: {ready.get('message')}"}
                else:
                    profile = profiled.with_trace(workers[impl].ask(f"profile {protocol.profile_calls}", "profile"),
                                                  groups=True)
                    workers[impl].ask("end", "cell")
                if not protocol.together(cell):
                    workers[impl].ask("release", "released")
            except WorkerDied as err:
                profile = {"status": "error", "message": f"the worker died in its profiled pass: {err.message}"}
                workers[impl] = start(impl)
            store.keep(inv, impl, {**record, "profile": profile})


def _measure(s: _Set, group: list[str], cell: Cell, settings: SweepSettings, protocol: Protocol, release: bool,
             loaded: bool, phases: Phases) -> None:
    """One cell for a group of an invocation's workers (`loaded`: _load has had them load it): each warms up, one at
    a time, on a GPU no other worker uses, then `blocks` turns each in rotating order, then each ends the cell."""
    ready: dict[str, dict] = {}
    store, inv = s.store, s.inv

    def died(impl: str, err: WorkerDied) -> None:
        s.died(cell, impl, err)
        ready.pop(impl, None)

    # the warm-ups and turns of workers that loaded the cell on one CPU of the slot, so that a turn's pair meets the
    # same host, re-picked before each turn (a lone worker loads in its warm-up, with every core of the slot)
    pids = [s.workers[i].proc.pid for i in group if s.workers.get(i) is not None] if loaded else []
    with affinity.turns_on_one_cpu(pids) as cpus:
        for impl in group:
            preparing = time.perf_counter()
            try:
                record = s.workers[impl].ask(f"cell {cell.index}", "ready", "cell")
            except WorkerDied as err:
                died(impl, err)
                continue
            finally:
                phases.add("preparing", time.perf_counter() - preparing, impl)
            if record["kind"] == "cell":
                s.final(cell, impl, record)
            else:
                ready[impl] = {**record, "blocks": [], "turns": [], "hosts": []}
        calls = {impl: protocol.calls_per_block(r["call_ms"], settings.repeats, settings.cell_budget_s)
                 for impl, r in ready.items()}
        turns = time.perf_counter()
        for turn in range(protocol.blocks):
            cpus.pick()
            order = list(ready)
            order = order[turn % len(order):] + order[:turn % len(order)] if order else []
            for impl in order:
                if impl not in ready:
                    continue
                try:
                    record = s.workers[impl].ask(f"time {calls[impl]}", "block", "cell")
                except WorkerDied as err:
                    died(impl, err)
                    continue
                if record["kind"] == "cell":  # the block failed (an oom, an error): the cell is over for it
                    s.final(cell, impl, {**record, "build_s": ready.pop(impl).get("build_s")})
                    continue
                ready[impl]["blocks"].append(record["times_ms"])
                ready[impl]["turns"].append(turn)
                ready[impl]["hosts"].append([cpus.cpu, cpus.op_us])   # a list: kept records go through JSON
        ending = time.perf_counter()
        phases.add("turns", ending - turns)
    for impl, prepared in list(ready.items()):  # a worker that dies leaves `ready`
        try:
            record = s.workers[impl].ask("end", "cell")
            if release:
                s.workers[impl].ask("release", "released")
        except WorkerDied as err:
            died(impl, err)
            continue
        store.keep(inv, impl, {**record, "blocks": prepared["blocks"], "turns": prepared["turns"],
                               "hosts": prepared["hosts"],
                               "steady": prepared["steady"], "warmup_calls": prepared["warmup_calls"],
                               "build_s": record.get("build_s", prepared.get("build_s")), "invocation": inv})
    phases.add("ends", time.perf_counter() - ending)


def _failed(cell: Cell, died: WorkerDied) -> dict:
    return {"kind": "cell", "cell": cell.index, "batch": cell.batch, "resolution": cell.resolution,
            "transfer": cell.transfer, "status": died.status, "message": died.message,
            "exit_status": died.returncode}


# ------------------------------------------------------------------------------------------------- rows
def cell_row(records: list[dict], batch: int, resamples: int = 2_000) -> dict:
    """One implementation's cell over its invocations: ok when at least one invocation measured it; its times are
    the median over the ok invocations of each one's median, with the two-level bootstrap interval."""
    ok = [r for r in records if r["status"] == "ok" and r.get("times_ms")]
    failed = [r for r in records if r not in ok]
    if not ok:
        first = failed[0]
        return {"status": first["status"], "message": first.get("message"), "invocations": 0,
                "exit_status": first.get("exit_status")}
    row = {"status": "ok", "invocations": len(ok), "repeats": sum(len(r["times_ms"]) for r in ok),
           "blocks": sum(len(r.get("blocks") or [1]) for r in ok),
           "warmup_calls": max(r.get("warmup_calls") or 0 for r in ok),
           "steady": all(r.get("steady", True) for r in ok), "h2d_bytes": ok[0].get("h2d_bytes"),
           "prepare_s": ok[0].get("prepare_s"),
           "message": None if not failed else "; ".join(
               f"invocation {r.get('invocation', '?')}: {r['status']}: {r.get('message')}" for r in failed)}
    for prefix, key, scale in (("time_ms", "times_ms", 1.0), ("time_per_sample_ms", "times_ms", batch),
                               ("h2d_ms", "h2d_ms", 1.0)):
        groups = [[t / scale for t in r[key]] for r in ok if r.get(key)]
        if groups:
            i = hierarchical_interval(groups, resamples=resamples)
            row.update({prefix: i.estimate, f"{prefix}_low": i.low, f"{prefix}_high": i.high})
    medians = [median(r["times_ms"]) for r in ok]
    row["invocation_spread"] = max(medians) / min(medians) if len(medians) > 1 else None
    return row


def block_rows(records: list[dict]) -> list[dict]:
    """The `sweep_blocks` table's rows of one implementation: each turn's median, for paired comparisons, and the
    CPU its workers took it on with that CPU's probe before it (null where the turns were not placed)."""
    out = []
    for r in records:
        if r["status"] != "ok":
            continue
        turns = r.get("turns") or []
        hosts = r.get("hosts") or [[None, None]] * len(turns)
        for turn, times, (cpu, op_us) in zip(turns, r.get("blocks") or [], hosts):
            out.append({"cell": r["cell"], "invocation": r.get("invocation", 0), "turn": turn, "calls": len(times),
                        "time_ms": median(times), "cpu": cpu, "host_op_us": op_us})
    return out


def python_worker_command(spec: dict, directory: Path) -> Callable[[str], list[str]]:
    """A Python worker's command line; its spec (implementation, inputs, grid, numerics, the cells to skip) is
    written once per set of cells to skip, to a file of its own: the invocations' workers of one implementation
    start together, and a spec written again for the next would be empty or another's while the first reads it."""
    paths: dict[str, Path] = {}

    def command(oom_at: str) -> list[str]:
        if oom_at not in paths:
            path = Path(directory) / f"{spec['implementation']}.{len(paths)}.spec.json"
            path.write_text(json.dumps({**spec, "oom_at": oom_at}))
            paths[oom_at] = path
        return [sys.executable, "-m", "abstraction_cost.study_a.sweep.worker", str(paths[oom_at])]
    return command
