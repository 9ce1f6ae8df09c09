"""The interleaved sweep split into shards (config study_a.sweep.shards): one timing job per (numerics, shard), each
with its own GPU slot, so that two GPUs share a numerics' sweep instead of one job per numerics being the run's tail.

A shard is a set of whole resolutions: the oom-skip rule (sweep_cells.OomTracker) acts only between cells of one
resolution, so a shard that holds every cell of its resolutions skips exactly the cells the unsharded walk skips,
and no shard needs another's result. Within a shard nothing changes: every implementation in turns at each cell,
the invocations, the store of kept records (one per shard job), cell indices those of the whole grid. The shards'
tables concatenate to the unsharded job's rows (rule concat_sweep).

Resolutions go to shards by estimated cost, the costliest first to the least loaded shard (longest processing time
first). The estimate (cell_cost_s) is per implementation and invocation: a fixed cost to prepare a cell (warm-up,
host input, output check), the turns (`blocks` × `block_ms`), and calls whose time grows with batch × resolution²,
at least MIN_BUDGET_REPEATS of them, cut at the cell budget. It only orders and balances cells, so its constants
need the right proportions, not a GPU's absolute speed (their basis: the measured default sweep in docs/results/).
It times nothing.
"""
from __future__ import annotations

from .cells import MIN_BUDGET_REPEATS, Cell, Protocol, SweepConfigError, SweepSettings

KEY = "study_a.sweep.shards"
PREPARE_S = 0.5          # a cell's preparation per implementation: warm-up calls, host input, C++ output check
SECONDS_PER_PIXEL = 8e-9  # a ResNet-50 fp32 call's time per input pixel on a current datacentre GPU


def shard_count(sweep: dict) -> int:
    """study_a.sweep.shards (default 1), refused unless a positive integer that the grid and protocol allow."""
    value = sweep.get("shards", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SweepConfigError(f"config key '{KEY}': {value!r} is not a positive integer")
    resolutions = len(set(sweep.get("resolutions") or []))
    if value > 1 and (sweep.get("protocol") or {}).get("mode", "interleaved") != "interleaved":
        raise SweepConfigError(f"config key '{KEY}': {value} shards need study_a.sweep.protocol.mode interleaved; "
                               "the serial sweep is already one job per implementation")
    if value > resolutions:
        raise SweepConfigError(f"config key '{KEY}': {value} shards for {resolutions} resolutions; a shard holds "
                               "whole resolutions (the oom-skip rule acts within one), so at most "
                               f"{resolutions}")
    return value


def cell_cost_s(cell: Cell, settings: SweepSettings, blocks: int, block_ms: float) -> float:
    """Estimated seconds one implementation spends on a cell in one invocation (the module's docstring)."""
    call_s = SECONDS_PER_PIXEL * cell.batch * cell.resolution ** 2
    calls = max(MIN_BUDGET_REPEATS, settings.repeats, blocks)
    timed = calls * call_s
    if settings.cell_budget_s:
        timed = min(timed, max(settings.cell_budget_s, MIN_BUDGET_REPEATS * call_s))
    return PREPARE_S + max(blocks * block_ms / 1000, timed) + (settings.warmup + 1) * call_s


def plan(settings: SweepSettings, shards: int, blocks: int, block_ms: float) -> list[list[Cell]]:
    """Each shard's cells in walk order; shard k's cells are all the cells of its resolutions."""
    by_resolution: dict[int, list[Cell]] = {}
    for cell in settings.cells():
        by_resolution.setdefault(cell.resolution, []).append(cell)
    if shards > len(by_resolution):
        raise SweepConfigError(f"config key '{KEY}': {shards} shards for {len(by_resolution)} resolutions")
    cost = {r: sum(cell_cost_s(c, settings, blocks, block_ms) for c in cells) for r, cells in by_resolution.items()}
    load, members = [0.0] * shards, [[] for _ in range(shards)]
    for r in sorted(cost, key=lambda r: (-cost[r], r)):
        k = min(range(shards), key=lambda i: (load[i], i))
        load[k] += cost[r]
        members[k].append(r)
    return [[c for r in sorted(rs) for c in by_resolution[r]] for rs in members]


def of_config(config: dict) -> list[list[Cell]]:
    """The shards of a config's sweep (study_a.sweep and its protocol)."""
    sweep = config["study_a"]["sweep"]
    protocol = Protocol.from_config(sweep)
    return plan(SweepSettings.from_config(config), shard_count(sweep), protocol.blocks, protocol.block_ms)
