"""The time a timing job's invocations spend getting their workers ready, for its environment row.

The protocols measure across invocations, so every invocation starts fresh worker processes and has them load
what they time. Until the last worker is up (interpreter, imports, CUDA context: worker_start_s) and then until the
last has loaded (its model or program, compiled ones from the cache or built: worker_load_s), the job's GPU does
nothing for it. Both lie inside the job's measured run, so benchmarks/run_time.py reads them from the row and counts
them as start-up and as builds, not as measuring. Wall times, not per-worker sums: the workers start and load at
once.
"""
from __future__ import annotations

_seconds: list[tuple[float, float]] = []   # each invocation's (start-up, loading), in this process
_mark = 0                                  # where the current measured run's began


def add(start_s: float, load_s: float) -> None:
    """One invocation's, or one batch's that started together (InvocationProtocol.batch): from launching the
    workers to the last one up, and from then to the last one loaded."""
    _seconds.append((start_s, load_s))


def environment_columns(when: str) -> dict:
    """At a measured run's start nothing (it marks where the run's invocations begin); at its end their sums
    (null for a run that started no workers)."""
    global _mark
    if when == "start":
        _mark = len(_seconds)
        return {}
    mine = _seconds[_mark:]
    return {"worker_start_s": sum(s for s, _ in mine) if mine else None,
            "worker_load_s": sum(load for _, load in mine) if mine else None}
