"""Inductor's cache key, the same for the same graph in every process.

Inductor keys a compiled graph on a pickle of its example inputs' metadata, memory format included. A
torch.memory_format pickles by its name, "torch.contiguous_format", which pickle resolves through
pickle.whichmodule: the first module in sys.modules that holds `torch`. That module depends on what the process
imported first (a compile-cache worker finds "torch._utils", a Snakemake job its own script, "__mp_main__"), so
without this module the same graph gets another key in each job, printed identically, and no job hits the
warm-up's entries. Registered once per process before its first compile, a reducer of our own names the format
by a function with a fixed module.
"""
from __future__ import annotations

import copyreg

import torch


def memory_format(name: str) -> torch.memory_format:
    """The memory format torch.<name> (what a pickled one is rebuilt with)."""
    return getattr(torch, name)


def _reduce(fmt: torch.memory_format) -> tuple:
    return memory_format, (str(fmt).removeprefix("torch."),)


def stable() -> None:
    """Pickle memory formats the same way in every process (idempotent); before Inductor builds its pickler."""
    copyreg.pickle(torch.memory_format, _reduce)
