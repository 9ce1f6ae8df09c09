"""Fault hooks for the fault suite (tests/faults), read from the environment; unset, each is a no-op.

    AC_TABLE_FAULT=kill:<table>      the job is SIGKILLed while it writes that table (a temporary half written)
    AC_TABLE_FAULT=enospc:<table>    writing that table fails with ENOSPC, as on a full disk
    AC_FAULT=oom@<phase>             a measured phase (e.g. train-1) raises torch.OutOfMemoryError
    AC_COMPILE_FAULT=error:<mode>    torch.compile in that compile mode fails in the backend at its first call
    AC_COMPILE_FAULT=recompile-limit:<mode>   dynamo's recompile limit is hit at once (it falls back to eager)
    AC_EVAL_FAULT=<kind>@<numerics>,...       one numerics of every backend-comparison job (study_a/comparison/serial.py):
        oom   its measuring raises torch.OutOfMemoryError
        segv  its C++ program crashes with SIGSEGV as it starts timing (AC_FAULT=segv@backend_eval-0, its own)
        kill  the job is SIGKILLed as that numerics starts, the numerics before it finished and kept

AC_FAULT=segv@<phase>-<epoch> and exit@<phase>-<epoch> crash the C++ programs (native/common/fault.h).
They exist so that each scenario of docs/faults.md runs end to end in CI, on the pipeline's own code paths.
"""
from __future__ import annotations

import errno
import os
import signal
from pathlib import Path
from typing import Callable


def _spec(variable: str, separator: str) -> tuple[str, str]:
    kind, _, target = os.environ.get(variable, "").partition(separator)
    return kind, target


def table_write(table: str, tmp: Path) -> None:
    """Called with the table's temporary file written, before it is renamed into place."""
    kind, target = _spec("AC_TABLE_FAULT", ":")
    if target != table:
        return
    if kind == "kill":
        with open(tmp, "r+b") as f:   # half the file, as a kill mid-write leaves it
            f.truncate(tmp.stat().st_size // 2)
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "enospc":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp))


def phase(name: str) -> None:
    """Called as a measured phase starts."""
    kind, target = _spec("AC_FAULT", "@")
    if kind == "oom" and target == name:
        import torch
        raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate 20.00 GiB (injected by AC_FAULT in "
                                     f"phase {name})")


def eval_numerics(numerics: str) -> str | None:
    """AC_EVAL_FAULT's fault for this numerics of a backend-comparison job: 'oom', 'segv', 'kill' or None."""
    for item in os.environ.get("AC_EVAL_FAULT", "").split(","):
        kind, _, target = item.strip().partition("@")
        if target == numerics and kind in ("oom", "segv", "kill"):
            return kind
    return None


def kill_self() -> None:
    """The job dies at once, as under a scheduler's time limit or a lost node."""
    os.kill(os.getpid(), signal.SIGKILL)


def compiled(fn: Callable, mode: str) -> Callable:
    """Called with torch.compile's result in a compile mode."""
    kind, target = _spec("AC_COMPILE_FAULT", ":")
    if target != mode:
        return fn
    if kind == "recompile-limit":
        import torch._dynamo
        torch._dynamo.config.recompile_limit = 0
    if kind == "error":
        def failing(*args):
            raise RuntimeError(f"backend compiler failed in mode {mode!r} (injected by AC_COMPILE_FAULT)")
        return failing
    return fn
