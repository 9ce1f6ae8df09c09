"""One timing job's workers start at a time on this host (gpus.starts_one_at_a_time, default false).

Processes that make their CUDA contexts at once on one host do not overlap that work (benchmarks/cuda_contexts.py:
k at once all take about k × 0.16 s on one H200), on different GPUs too: on two H200s, where the sweep's 30 workers
and a backend comparison's 24 started together on the two GPUs (both jobs had waited for the AOTInductor builds),
each job's were up in 16-20 s against 6-8 s alone (docs/results/2026-11-29-h200x2-gpu-smoke-same-vm.md). Taking
turns, the first job's workers should be up in their own time and the second's in about both jobs' time: neither
later than together. Not yet measured (benchmarks/overlays/starts_one_at_a_time.yaml).

A turn is a flock on `starting` in gpu_slots' lock folder, held from the launch of a job's workers until they are
all up; the kernel drops it with the process. Only a job holding a GPU slot takes turns (gpu_slots configures it as
the job takes its slot): a CPU job's workers make no context.
"""
from __future__ import annotations

import fcntl
import logging
import os
import time
from pathlib import Path

_folder: Path | None = None   # where the turn's lock is; None: turns off


def configure(on: bool, folder: Path) -> None:
    """Whether this job's worker starts take turns, on a lock in `folder` (gpu_slots, as a GPU job takes its slot)."""
    global _folder
    _folder = folder if on else None


class Turn:
    """This job's turn to start workers, taken at once or after another job's workers are up (a no-op where turns
    are off); release() ends it, and again does nothing."""

    def __init__(self, log: logging.Logger | None = None):
        self._fd: int | None = None
        self.waited_s = 0.0
        if _folder is None:
            return
        _folder.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(_folder / "starting", os.O_RDWR | os.O_CREAT, 0o666)
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
