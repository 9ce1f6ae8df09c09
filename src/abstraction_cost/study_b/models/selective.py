"""Selective compilation: the model with only the oracle's chosen blocks compiled, measured end to end.

Two constructions of one choice (a string with one character per block, e eager, c compiled; oracles.py):

- `blocks`: every compiled block is its own graph (vision_models.compile_unit). This is the construction the
  oracles' cost model describes (layers.py measured each block compiled alone), so its realised time tests the
  prediction.
- `segments`: each maximal run of consecutive compiled blocks is compiled as one graph, so Inductor may fuse
  across the run's inner boundaries. This is how one would ship the choice; the gap to `blocks` is what the
  block-by-block cost model cannot see.

The step (after the oracles, in its (model, pair) job) times, in the turns of the end-to-end step
(vision_protocol.py: the layer mode's compiled worker holds them): eager, the whole model compiled (`compiled`),
every block compiled alone (`all_blocks`), the dynamic programme's choice in both constructions (`dp_blocks`,
`dp_segments`) and the best-of-two-runs choice from the layer timers (`btr_blocks`, the study's construction).
The block units are the worker's own, compiled with its whole model (vision_models.ensure_compiled, as the
layer times' were), so a build row records what that variant compiled anew: only `dp_segments` compiles a graph
of its own. predicted_ms on a row is the oracle's prediction of that variant's end-to-end time (vision_oracles),
where there is one.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch

from . import vision as vm
from .layers import chain
from .oracles import COMPILED

if TYPE_CHECKING:   # the job reads the oracles' table; its workers, started together, need not import polars
    import polars as pl

# variant -> (oracle row it takes the choice from, construction); eager and compiled take none
VARIANTS = {"all_blocks": (None, "blocks"), "dp_blocks": ("dp", "blocks"), "dp_segments": ("dp", "segments"),
            "btr_blocks": ("btr_timers", "blocks")}


def segments(choice: tuple[int, ...]) -> list[tuple[int, int, bool]]:
    """Maximal runs of one state: (start, stop, compiled) with blocks start..stop-1."""
    runs, start = [], 0
    for i in range(1, len(choice) + 1):
        if i == len(choice) or choice[i] != choice[start]:
            runs.append((start, i, choice[start] == COMPILED))
            start = i
    return runs


def build(parts, choice: tuple[int, ...], construction: str, mode: str, label: str,
          units: list[Callable] | None = None) -> Callable:
    """The model as `choice` compiles it, in `construction` (blocks | segments); `blocks` takes compiled blocks
    from `units` (one per block, already compiled) where given, else compiles them."""
    if len(choice) != len(parts):
        raise ValueError(f"{label}: choice has {len(choice)} blocks, the model {len(parts)}")
    fns: list[Callable] = []
    for start, stop, compiled in segments(choice):
        modules = [b.module for b in parts[start:stop]]
        if not compiled:
            fns.extend(modules)
        elif construction == "blocks" and units is not None:
            fns.extend(units[start:stop])
        elif construction == "blocks":
            fns.extend(vm.compile_unit(m, mode, f"{label}.{b.name}") for m, b in zip(modules, parts[start:stop]))
        elif construction == "segments":
            fns.append(vm.compile_unit(torch.nn.Sequential(*modules), mode, f"{label}.{start}-{stop - 1}"))
        else:
            raise ValueError(f"unknown construction {construction!r}; allowed: blocks, segments")
    return chain(fns)


def choices_from_oracles(oracles: pl.DataFrame, n: int) -> dict[str, tuple[str, float | None]]:
    """variant -> (choice string, predicted_ms) from one (model, pair)'s vision_oracles rows."""
    by_oracle = {r["oracle"]: r for r in oracles.iter_rows(named=True)}
    out = {}
    for variant, (oracle, _) in VARIANTS.items():
        if oracle is None:
            out[variant] = ("c" * n, None)
            continue
        row = by_oracle.get(oracle)
        if row is None or row["choice"] is None:
            raise ValueError(f"vision_oracles has no {oracle!r} row with a choice for this model and pair")
        out[variant] = (row["choice"], row["predicted_ms"])
    return out


def new_graphs(choice: tuple[int, ...], construction: str, units: list[Callable] | None) -> int:
    """Graphs that building `choice` must compile anew: one per compiled segment, or per compiled block
    without the job's units."""
    runs = [(start, stop) for start, stop, compiled in segments(choice) if compiled]
    if construction == "segments":
        return len(runs)
    return 0 if units is not None else sum(stop - start for start, stop in runs)


def _prepare_choice(case: vm.Case, loaded: vm.Loaded, choice: tuple[int, ...], construction: str,
                    variant: str) -> vm.Prepared:
    fn = build(loaded.parts, choice, construction, case.mode, f"{case.model}.{variant}", loaded.units)
    prepared = vm.prepare_timed(fn, case.compiled, case.mode, loaded.inputs[0], loaded.device)
    expected = new_graphs(choice, construction, loaded.units)
    if prepared.graphs < expected:
        raise vm.NotCompiled(f"{case.model} {variant}: {prepared.graphs} graphs compiled for {expected} new "
                             "compiled segments; the rest would run eager")
    return prepared
