"""The time a timing job's invocations spend starting their workers, for its environment row (worker_start_s).

The protocols measure across invocations, so every invocation starts fresh worker processes; until the last of
them is up (interpreter, imports, CUDA context) the job's GPU does nothing for it. That time lies inside the job's
measured run, so benchmarks/run_time.py reads it from the row and counts it as start-up, not as measuring.
"""
from __future__ import annotations

_seconds: list[float] = []   # each invocation's, in this process
_mark = 0                    # where the current measured run's began


def add(seconds: float) -> None:
    """One invocation's start-up: from launching its workers to the last one up."""
    _seconds.append(seconds)


def environment_columns(when: str) -> dict:
    """At a measured run's start nothing (it marks where the run's start-ups begin); at its end worker_start_s,
    their sum (null for a run that started no workers)."""
    global _mark
    if when == "start":
        _mark = len(_seconds)
        return {}
    mine = _seconds[_mark:]
    return {"worker_start_s": sum(mine) if mine else None}
