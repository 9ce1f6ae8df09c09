"""Study A's inference sweep, what every sweep process shares (Python and C++ alike, native/common/sweep.h):
the settings of config study_a.sweep (SweepSettings, and Protocol: the interleaved protocol's) and their checks,
the walk order of the cells, the oom-skip rule, the fault test hook, and how one cell's timed calls become a row of
the sweep table.

Walk order: resolution ascending, then batch ascending, then the transfer modes in the config's order (one process
measures a shape's modes back to back, so they share its state: clocks, allocator cache, a compiled build, the
warm-up). Once batch B is oom at resolution R in mode T, the cells at R that need at least as much device memory
are recorded oom without being tried: larger batches in T or in a mode needing as much device memory
(DEVICE_MEMORY_RANK: the float32 modes hold the same float32 batch on the device, uint8-pinned its uint8 batch
too), "skipped: batch B already out of memory at this resolution", and batch B itself in such a later mode,
"... in T".
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from ... import faults as fault_hooks, implementations
from ...measure import invocation_protocol
from ...measure.numerics import NUMERICS
from ...measure.statistics import median_interval

TRANSFERS = ("float32-pageable", "float32-pinned", "uint8-pinned")
SKIPPED = "skipped: batch {batch} already out of memory at this resolution"
# device memory a cell needs beyond the model's at one shape, by transfer mode: pinning is host memory only
DEVICE_MEMORY_RANK = {"float32-pageable": 0, "float32-pinned": 0, "uint8-pinned": 1}


class SweepConfigError(ValueError):
    """A study_a.sweep value that cannot run; the message names the key."""


@dataclass(frozen=True)
class Cell:
    index: int
    batch: int
    resolution: int
    transfer: str


@dataclass(frozen=True)
class SweepSettings:
    batches: tuple[int, ...]
    resolutions: tuple[int, ...]
    warmup: int
    repeats: int
    transfers: tuple[str, ...]
    implementations: tuple[str, ...]
    compile_modes: tuple[str, ...]
    pool: int
    kernel_batch: int
    kernel_resolution: int
    kernel_top: int
    require_gpu: bool
    numerics: tuple[str, ...] = ("fp32",)  # walked in turn by each implementation's job; first: the study's
    compile_shapes: str = "per-shape"  # how compiled-<mode> meets the grid's shapes: COMPILE_SHAPES
    cell_budget_s: float | None = None  # a cell's timed calls end once they took this long (more_repeats)
    kernel_numerics: tuple[str, ...] = ("fp32",)  # the kernel table's numerics: kernels.numerics, else numerics
    static_compile_modes: tuple[str, ...] = ()  # compiled-static's modes: static_compile_modes, else compile_modes

    @classmethod
    def from_config(cls, config: dict) -> "SweepSettings":
        s = config["study_a"]["sweep"]
        check(s)
        k = s["kernels"]
        return cls(tuple(sorted(set(s["batches"]))), tuple(sorted(set(s["resolutions"]))), s["warmup"],
                   s["repeats"], tuple(s["transfers"]), tuple(s["implementations"]),
                   tuple(s.get("compile_modes", ())), s["pool"], k["batch_size"], k["resolution"], k["top"],
                   s["require_gpu"], tuple(s["numerics"]), s.get("compile_shapes", "per-shape"),
                   s.get("cell_budget_s"), tuple(k.get("numerics", s["numerics"])),
                   tuple(s.get("static_compile_modes", ())))

    def cells(self) -> list[Cell]:
        return walk(self.batches, self.resolutions, self.transfers)

    def jobs(self) -> list[str]:
        """Implementation names of the sweep's processes: a compile entry becomes <entry>-<mode> per compile mode
        (compiled-static per static_compile_modes where that is set)."""
        return implementations.jobs(self.implementations, self.compile_modes,
                                    {"compiled-static": self.static_compile_modes or self.compile_modes})


COMPILE_MODES = implementations.COMPILE_MODES
COMPILE_SHAPES = ("per-shape", "dynamic")  # a fresh static build per shape, or one dynamic-shape build per job
MIN_BUDGET_REPEATS = 3  # the fewest timed calls a cell budget leaves (a median and its interval); sweep.h's too


def more_repeats(done: int, elapsed_s: float, repeats: int, budget_s: float | None) -> bool:
    """Whether a cell makes another timed call, after `done` calls that took `elapsed_s`: up to `repeats`; with a
    budget (study_a.sweep.cell_budget_s), none once they took budget_s and were at least MIN_BUDGET_REPEATS. A cell
    of a few milliseconds still gets `repeats`; one of seconds per call (batch 512 at 1024 px) gets three."""
    if done >= repeats:
        return False
    return budget_s is None or done < MIN_BUDGET_REPEATS or elapsed_s < budget_s


def _positive_ints(values, key: str) -> None:
    if not isinstance(values, list) or not values:
        raise SweepConfigError(f"config key 'study_a.sweep.{key}': need a non-empty list of positive integers, "
                               f"got {values!r}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SweepConfigError(f"config key 'study_a.sweep.{key}': {v!r} is not a positive integer")


def _each_once(values, allowed, key: str) -> None:
    """A non-empty list of `allowed` entries, none twice."""
    if not isinstance(values, list) or not values:
        raise SweepConfigError(f"config key 'study_a.sweep.{key}': need a non-empty list of {list(allowed)}, "
                               f"got {values!r}")
    for i, v in enumerate(values):
        if v not in allowed or v in values[:i]:
            raise SweepConfigError(f"config key 'study_a.sweep.{key}': {v!r} is "
                                   f"{'twice in the list' if v in allowed else f'not one of {list(allowed)}'}")


def check(s: dict, built: tuple[str, ...] | None = None) -> None:
    """Refuse what cannot run, naming the key (the schema says the same; this is the check jobs rely on). `built`:
    the implementations that can run (default: the registry's sweep entries)."""
    built = implementations.names("sweep") if built is None else built
    _positive_ints(s.get("batches"), "batches")
    _positive_ints(s.get("resolutions"), "resolutions")
    for key in ("repeats", "pool"):
        _positive_ints([s.get(key)], key)
    _each_once(s.get("transfers"), TRANSFERS, "transfers")
    numerics = s.get("numerics")
    _each_once(numerics, NUMERICS, "numerics")
    _each_once((s.get("kernels") or {}).get("numerics", numerics), numerics, "kernels.numerics")
    for impl in s.get("implementations") or [None]:
        if impl not in built:
            raise SweepConfigError(f"config key 'study_a.sweep.implementations': {impl!r} is not built here; "
                                   f"built: {list(built)}")
    if any(implementations.REGISTRY[i].compile_modes for i in s["implementations"]):
        modes = s.get("compile_modes") or []
        if not modes or any(m not in COMPILE_MODES for m in modes):
            raise SweepConfigError(f"config key 'study_a.sweep.compile_modes': {modes!r}; need one or more of "
                                   f"{list(COMPILE_MODES)} when implementations has a torch.compile build")
    static = s.get("static_compile_modes")
    if static is not None and (not isinstance(static, list) or any(m not in COMPILE_MODES for m in static)):
        raise SweepConfigError(f"config key 'study_a.sweep.static_compile_modes': {static!r}; need a list of "
                               f"{list(COMPILE_MODES)} (leave it out for compile_modes)")
    budget = s.get("cell_budget_s")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget <= 0):
        raise SweepConfigError(f"config key 'study_a.sweep.cell_budget_s': {budget!r} is not a positive number of "
                               "seconds (leave it out for every cell's full repeats)")
    _check_protocol(s.get("protocol") or {})
    if not isinstance(s.get("compile_warm_up", True), bool):
        raise SweepConfigError(f"config key 'study_a.sweep.compile_warm_up': {s['compile_warm_up']!r} is not true or "
                               "false")
    if s.get("compile_shapes", "per-shape") not in COMPILE_SHAPES:
        raise SweepConfigError(f"config key 'study_a.sweep.compile_shapes': {s['compile_shapes']!r} is not one of "
                               f"{list(COMPILE_SHAPES)}")


PROTOCOL_MODES = ("interleaved", "serial")
PROTOCOL_DEFAULTS = {"mode": "interleaved", "invocations": 3, "max_invocations": 10, "precision": 0.05,
                     "blocks": 6, "block_ms": 50.0, "warmup_max": 30, "interleave_max_pixels": 32 * 512 * 512,
                     "profile_calls": 5}


@dataclass(frozen=True, kw_only=True)
class Protocol(invocation_protocol.InvocationProtocol):
    """study_a.sweep.protocol (config/README.md says how its defaults were chosen): the shared invocation protocol's
    keys, the mode, and the largest cell (batch × pixels) whose implementations take turns beside each other."""
    mode: str
    interleave_max_pixels: int

    @classmethod
    def from_config(cls, sweep: dict) -> "Protocol":
        return cls(**invocation_protocol.settings(PROTOCOL_DEFAULTS, sweep.get("protocol")))

    def together(self, cell: Cell, sets: int = 1) -> bool:
        """Whether `sets` sets of workers (one per invocation walking together) may all hold the cell at once:
        interleave_max_pixels is what one set may hold."""
        return cell.batch * cell.resolution ** 2 * sets <= self.interleave_max_pixels

    def calls_per_block(self, call_ms: float, repeats: int, budget_s: float | None) -> int:
        """Calls filling about block_ms, enough for `repeats` over the blocks, within the cell budget."""
        n = max(1, round(self.block_ms / max(call_ms, 1e-3)), math.ceil(repeats / self.blocks))
        if budget_s:
            n = min(n, max(1, math.floor(budget_s * 1000 / (self.blocks * max(call_ms, 1e-3)))))
        return n


def _check_protocol(p: dict) -> None:
    """study_a.sweep.protocol: the shared keys by their rules, the mode one of PROTOCOL_MODES."""
    own = {"mode": invocation_protocol.one_of(PROTOCOL_MODES), "interleave_max_pixels": invocation_protocol.count(1)}
    invocation_protocol.check(p, "study_a.sweep.protocol", own, SweepConfigError)


def walk(batches, resolutions, transfers) -> list[Cell]:
    cells = []
    for r in sorted(set(resolutions)):
        for b in sorted(set(batches)):
            for t in transfers:
                cells.append(Cell(len(cells), b, r, t))
    return cells


@dataclass
class OomTracker:
    """Smallest oom batch per (resolution, transfer), so that the cells needing at least as much device memory
    are skipped (the module's docstring; native/common/sweep.h applies the same rule)."""
    smallest: dict[tuple[int, str], int] = field(default_factory=dict)

    def add(self, cell: Cell) -> None:
        key = (cell.resolution, cell.transfer)
        self.smallest[key] = min(cell.batch, self.smallest.get(key, cell.batch))

    def skip_message(self, cell: Cell) -> str | None:
        rank = DEVICE_MEMORY_RANK[cell.transfer]
        for (resolution, transfer), batch in sorted(self.smallest.items(), key=lambda kv: (kv[1], kv[0])):
            if resolution != cell.resolution or DEVICE_MEMORY_RANK[transfer] > rank:
                continue
            if cell.batch > batch:
                return SKIPPED.format(batch=batch)
            if cell.batch == batch and transfer != cell.transfer:
                return f"{SKIPPED.format(batch=batch)} in {transfer}"
        return None

    def flag(self) -> str:
        """--oom-at for a restarted C++ program."""
        return ",".join(f"{r}:{b}:{t}" for (r, t), b in sorted(self.smallest.items()))


def faults(environ=os.environ) -> dict[int, str]:
    """AC_FAULT's cell items -> {cell index: "oom" | "crash" | "wrong"}: the faults inside a cell, in Python as in
    C++ ("wrong": the cell's output is not eager's, so it becomes wrong_output, untimed)."""
    return {int(index): what for what, index in fault_hooks.at("cell", environ) if what != "kill"}


def kills(environ=os.environ) -> set[int]:
    """AC_FAULT's cell:kill@K -> {K}: the job kills itself (faults.kill_job) once cell K's row is kept."""
    return {int(index) for what, index in fault_hooks.at("cell", environ) if what == "kill"}


def _interval(values, prefix: str, scale: float = 1.0) -> dict:
    if not values:
        return dict.fromkeys((prefix, f"{prefix}_low", f"{prefix}_high"))
    i = median_interval([v / scale for v in values])
    return {prefix: i.estimate, f"{prefix}_low": i.low, f"{prefix}_high": i.high}


TIMED_COLUMNS = tuple(f"{name}{end}" for name in ("time_ms", "time_per_sample_ms", "h2d_ms")
                      for end in ("", "_low", "_high"))  # timed_columns' times: none where a cell has no time


def timed_columns(batch: int, times_ms, h2d_ms) -> dict:
    """Median and bootstrap interval per batch, per sample, and of the copy within those calls."""
    return {"repeats": len(times_ms), **_interval(times_ms, "time_ms"),
            **_interval(times_ms, "time_per_sample_ms", batch), **_interval(h2d_ms, "h2d_ms")}


def kind(implementation: str) -> tuple[str, str]:
    """A sweep job's (backend, runtime)."""
    impl = implementations.get(implementation)
    return impl.backend, impl.runtime


def build_kind(implementation: str, compile_shapes: str = "per-shape") -> str:
    """The sweep's build column: none, dynamic, or per-shape (a compile entry's as study_a.sweep.compile_shapes)."""
    build = implementations.get(implementation).sweep_build
    return compile_shapes if build == "compile_shapes" else build


def _cell_columns(cell: Cell) -> dict:
    return {"cell": cell.index, "batch_size": cell.batch, "resolution": cell.resolution, "transfer": cell.transfer}


def _not_run_rows(cells: list[Cell], status: str, message: str) -> list[dict]:
    return [{**_cell_columns(c), "status": status, "message": message} for c in cells]


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"
