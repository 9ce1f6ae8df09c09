"""Fault hooks for the fault suite (tests/faults): one variable, AC_FAULT, a comma-separated list of items
`site:what@where`; unset, every hook is a no-op. The C++ programs read the same variable in the same grammar
(native/common/fault.h), each acting on its own sites and checking every item.

    table:kill@<table>              the job is SIGKILLed while it writes that table (a temporary half written)
    table:enospc@<table>            writing that table fails with ENOSPC, as on a full disk
    phase:oom@<phase>               a measured phase (e.g. train-1) raises torch.OutOfMemoryError
    phase:segv@<phase>-<epoch>      a C++ program crashes with SIGSEGV as it starts that phase (e.g. train-1)
    phase:exit@<phase>-<epoch>      a C++ program exits with status 3 there
    compile:error@<mode>            torch.compile in that compile mode fails in the backend at its first call
    compile:recompile-limit@<mode>  dynamo's recompile limit is hit at once (it falls back to eager)
    eval:oom@<numerics>             that numerics of every backend-comparison job raises an oom as it is measured
    eval:segv@<numerics>            its C++ program crashes with SIGSEGV as it starts timing
    eval:kill@<numerics>            the job is SIGKILLed as that numerics starts, the numerics before it kept
    cell:oom|crash|wrong@<cell>     every sweep's cell K (the comparison's one cell is 0), in Python as in C++, is an
                                    injected oom, a crash, or an output that is not eager's (wrong_output)
    cell:kill@<cell>                the job kills itself once cell K's row is kept

Every hook acts at a boundary (a table's write, a phase's or a cell's start, a compile), outside timed calls. A
malformed item is a ValueError naming the variable and the item.
"""
from __future__ import annotations

import errno
import os
import signal
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Mapping

VARIABLE = "AC_FAULT"
# site -> what may happen there; native/common/fault.h holds the same table
SITES = {"table": ("kill", "enospc"), "phase": ("oom", "segv", "exit"), "compile": ("error", "recompile-limit"),
         "eval": ("oom", "segv", "kill"), "cell": ("oom", "crash", "wrong", "kill")}


def _items(value: str) -> list[tuple[str, str, str]]:
    """(site, what, where) of every item of an AC_FAULT value, each checked."""
    items = []
    for item in filter(None, value.split(",")):
        site, _, rest = item.partition(":")
        what, at, where = rest.partition("@")
        if site not in SITES or what not in SITES[site] or not at or not where or (
                site == "cell" and not where.isdigit()):
            raise ValueError(f"{VARIABLE}: {item!r} is not site:what@where; " + ", ".join(
                f"{s}:{'|'.join(whats)}" for s, whats in SITES.items()) + " (a cell's where is its index)")
        items.append((site, what, where))
    return items


def at(site: str, environ: Mapping[str, str] = os.environ) -> list[tuple[str, str]]:
    """(what, where) of AC_FAULT's items at `site`, in their order."""
    return [(what, where) for s, what, where in _items(environ.get(VARIABLE, "")) if s == site]


def replaced(site: str, *items: str) -> str:
    """AC_FAULT's value with its items at `site` replaced by `items` (each site:what@where) and the others kept: the
    value a process launched for one injected fault gets."""
    kept = [f"{s}:{what}@{where}" for s, what, where in _items(os.environ.get(VARIABLE, "")) if s != site]
    return ",".join([*kept, *items])


@contextmanager
def injected(site: str, *items: str):
    """AC_FAULT as replaced() makes it while the block runs, for the programs launched inside; then as it was."""
    saved = os.environ.get(VARIABLE)
    os.environ[VARIABLE] = replaced(site, *items)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(VARIABLE, None)
        else:
            os.environ[VARIABLE] = saved


def table_write(table: str, tmp: Path) -> None:
    """Called with the table's temporary file written, before it is renamed into place."""
    whats = {what for what, where in at("table") if where == table}
    if "kill" in whats:
        with open(tmp, "r+b") as f:   # half the file, as a kill mid-write leaves it
            f.truncate(tmp.stat().st_size // 2)
        os.kill(os.getpid(), signal.SIGKILL)
    if "enospc" in whats:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp))


def phase(name: str) -> None:
    """Called as a measured phase starts."""
    if ("oom", name) in at("phase"):
        import torch
        raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate 20.00 GiB (injected by {VARIABLE} in "
                                     f"phase {name})")


def eval_numerics(numerics: str) -> str | None:
    """The fault of this numerics of a backend-comparison job: 'oom', 'segv', 'kill' or None."""
    return next((what for what, where in at("eval") if where == numerics), None)


def kill_job() -> None:
    """The job dies at once, as under a scheduler's time limit or a lost node: its programs, then itself, by
    SIGKILL."""
    from .run_guard import descendants
    for child in descendants(os.getpid()):
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass
    os.kill(os.getpid(), signal.SIGKILL)


class InjectedCrash(RuntimeError):
    """cell:crash@K in a Python process: the cell fails as a crash would, and the walk goes on."""


def compiled(fn: Callable, mode: str) -> Callable:
    """Called with torch.compile's result in a compile mode."""
    whats = {what for what, where in at("compile") if where == mode}
    if "recompile-limit" in whats:
        import torch._dynamo
        torch._dynamo.config.recompile_limit = 0
    if "error" in whats:
        def failing(*args):
            raise RuntimeError(f"backend compiler failed in mode {mode!r} (injected by {VARIABLE})")
        return failing
    return fn
