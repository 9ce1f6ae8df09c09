"""How fast the host issues work, recorded at a measuring job's start and end (its environment row).

Host-bound cells (small batches and resolutions, batch 1) time the host as much as the GPU: two machines of one
type can differ there while their device work agrees, so a comparison of runs needs the host's speed beside them.
Two probes, each a few tens of milliseconds, on the job's own (pinned) cores:

    host_op_us      median over blocks of the wall time of one ATen op dispatched from Python (torch.add on
                    one-element CPU tensors): the interpreter and dispatcher cost that eager pays per operator
    host_copy_gbps  the best of a few copies of 64 MiB between pageable host buffers (torch's copy_): the memory
                    bandwidth a float32-pageable host-to-device transfer stages through

Neither touches the GPU, so a probe never disturbs another job's device.
"""
from __future__ import annotations

import statistics
import time

import torch

OPS_PER_BLOCK = 1000
BLOCKS = 5
COPY_MIB = 64
COPIES = 2


def op_us(ops: int = OPS_PER_BLOCK, blocks: int = BLOCKS) -> float:
    a, b = torch.ones(1), torch.ones(1)
    torch.add(a, b)  # the op's first call (dispatch caches) is not a block's
    per_block = []
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(ops):
            torch.add(a, b)
        per_block.append((time.perf_counter() - start) / ops * 1e6)
    return statistics.median(per_block)


def copy_gbps(mib: int = COPY_MIB, copies: int = COPIES) -> float:
    source = torch.ones(mib * 2**20 // 4)
    target = torch.empty_like(source)
    target.copy_(source)  # first touch of the target's pages is not a copy's time
    best = min(_timed_copy(target, source) for _ in range(copies))
    return source.numel() * 4 / best / 1e9


def _timed_copy(target: torch.Tensor, source: torch.Tensor) -> float:
    start = time.perf_counter()
    target.copy_(source)
    return time.perf_counter() - start


def environment_columns(when: str) -> dict:
    """host_op_us_<when> and host_copy_gbps_<when> for the environment row; `when`: start or end. Null where the
    host cannot spare the copy's memory: a probe never fails the job it describes."""
    try:
        return {f"host_op_us_{when}": op_us(), f"host_copy_gbps_{when}": copy_gbps()}
    except (MemoryError, RuntimeError):
        return {f"host_op_us_{when}": None, f"host_copy_gbps_{when}": None}
