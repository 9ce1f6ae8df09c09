"""One timing job's workers start at a time on this host (gpus.starts_one_at_a_time, default false).

Invariant: with the key on, a GPU job launches its workers only while it holds the host's turn, and gives the turn
back once they are all up, before its first cell; with it off, no job waits. Why: processes that make their CUDA
contexts at once on one host do not overlap that work, on different GPUs too (benchmarks/cuda_contexts.py; the
collisions of two jobs' starts on two GPUs are in docs/results/). Taking turns, the first job's workers should be
up in their own time and the second's in about both jobs' time: neither later than together. Not yet measured
(benchmarks/overlays/starts_one_at_a_time.yaml).

A turn is a flock on `starting` in gpu_slots' lock folder (gpu_slots.open_lock: every user may lock it), held from
the launch of a job's workers until they are all up; the kernel drops it with the process. Only a job holding a
GPU slot takes turns (gpu_slots configures it as the job takes its slot): a CPU job's workers make no context.
"""
from __future__ import annotations

import fcntl
import logging
import os
import time

LOCK_NAME = "starting"
_on = False


def configure(on: bool) -> None:
    """Whether this job's worker starts take turns (gpu_slots, as a GPU job takes its slot)."""
    global _on
    _on = on


class Turn:
    """This job's turn to start workers, taken at once or after another job's workers are up (a no-op where turns
    are off); release() ends it, and again does nothing."""

    def __init__(self, log: logging.Logger | None = None):
        self._fd: int | None = None
        self.waited_s = 0.0
        if not _on:
            return
        from . import gpu_slots   # here: gpu_slots imports this module
        self._fd = gpu_slots.open_lock(LOCK_NAME)
        asked = time.monotonic()
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        self.waited_s = time.monotonic() - asked
        if log is not None and self.waited_s >= 0.1:
            log.info("waited %.1f s for another job's workers to start (gpus.starts_one_at_a_time)", self.waited_s)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)   # the flock goes with the last descriptor of its open file
            self._fd = None
