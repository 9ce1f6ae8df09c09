"""Where each level's time goes (table decomposition), per Study A cell and implementation, for both experiments
that time the same calls (`experiment`): every sweep cell (sweep: median time per batch, H2D copy included; its
profiled pass in sweep_profile) and the backend comparison's one cell (backend_comparison: the median of the
invocations' medians per batch; its H2D copy the median of backend_eval's h2d_ms; its profiled pass in
backend_profile; cell 0 here). The timed call is set beside its profiled pass (host issue time, kernel time, launches,
device idle) and split into the stack's levels by the pairs of implementations that differ
by one level, in the same numerics and cell:
- transfer: the host-to-device copy within the timed call (sweep.h2d_ms);
- python (the interpreter): eager - torchscript-cpp;
- dispatch (ATen's dispatcher and the caching allocator): libtorch - cudnn;
- launch (one launch per kernel): cudnn - cudnn-graphs;
- device work: the kernels' summed durations (sweep_profile.device_ms);
- other: the rest of the timed call (time - transfer - the levels the implementation carries - device work):
  host time not hidden under device work that no pair isolates (negative where the host's levels overlap the
  device's work, as in a device-bound cell).
An implementation carries the levels above it in the stack (CARRIES); a pair difference below zero is no
measurable cost at that cell, so the level is 0. fusion_ms, for compiled builds and aoti, is the kernel time fusion
saved: eager's device_ms minus the build's. `bound` is host where the device idled more than half the call.
A level whose pair lacks a row (an implementation not run, not ok) is null, and the message names what is missing;
without device times (no CUDA; CUPTI refused, or an ac_cudnn built without CUPTI) device work and other are null,
and the message says why (the profile's device_message); ac_cudnn's CUPTI trace gives cudnn and cudnn-graphs
theirs as the other implementations'."""
from __future__ import annotations

import polars as pl

from .. import tables

LEVELS = {"python": ("eager", "torchscript-cpp"), "dispatch": ("libtorch", "cudnn"),
          "launch": ("cudnn", "cudnn-graphs")}
_ALL = ("python", "dispatch", "launch")
CARRIES = {"eager": _ALL, "torchscript-python": ("dispatch", "launch"), "torchscript-cpp": ("dispatch", "launch"),
           "libtorch": ("dispatch", "launch"), "aoti": ("launch",), "cudnn": ("launch",), "cudnn-graphs": ()}
FUSED = ("aoti", "compiled")  # and every compiled-<mode>
KEYS = ["numerics", "cell"]
HOST_BOUND_IDLE = 0.5  # the device idle over more than this share of the call: host-bound


def carries(implementation: str) -> tuple[str, ...]:
    """The levels an implementation's call passes through; compiled builds run Dynamo's guards and launch the
    generated kernels one by one."""
    if implementation.startswith("compiled"):
        return ("launch",)
    return CARRIES.get(implementation, ())


def _fused(implementation: str) -> bool:
    return implementation.startswith("compiled") or implementation in FUSED


def decomposition_rows(sweep: pl.DataFrame, profile: pl.DataFrame, backend_comparison: pl.DataFrame | None = None,
                       backend_eval: pl.DataFrame | None = None,
                       backend_profile: pl.DataFrame | None = None) -> pl.DataFrame:
    """Rows of table decomposition: every ok sweep row of the interleaved sweep (experiment sweep), then every ok
    backend_comparison row (experiment backend_comparison) where the comparison's tables are given, each with its
    profile where it has one."""
    frames = [_rows(sweep.filter(pl.col("status") == "ok", pl.col("time_ms").is_not_null()), profile, "sweep")]
    if backend_comparison is not None:
        profiled = None if backend_profile is None else backend_profile.with_columns(cell=pl.lit(0, pl.Int64))
        frames.append(_rows(backend_timed(backend_comparison, backend_eval), profiled, "backend_comparison"))
    return pl.concat(frames, how="vertical")


def backend_timed(comparison: pl.DataFrame, evals: pl.DataFrame | None) -> pl.DataFrame:
    """The comparison's ok rows as the sweep's columns: time_ms per batch, h2d_ms the median of the timed calls'
    copies (null without backend_eval or on a serial run), cell 0, its transfer from backend_eval."""
    ok = comparison.filter(pl.col("status") == "ok", pl.col("time_per_sample_ms").is_not_null())
    keys = ["numerics", "implementation"]
    timed = ok.select(*keys, "batch_size", "resolution", "run_id",
                      time_ms=pl.col("time_per_sample_ms") * pl.col("batch_size"), cell=pl.lit(0, pl.Int64))
    if evals is not None and "h2d_ms" in evals.columns:
        copies = (evals.filter(pl.col("status") == "ok").group_by(keys)
                  .agg(pl.col("h2d_ms").median(), pl.col("transfer").drop_nulls().first()))
        timed = timed.join(copies, on=keys, how="left")
    else:
        timed = timed.with_columns(h2d_ms=pl.lit(None, pl.Float64), transfer=pl.lit(None, pl.String))
    return timed


def _rows(timed: pl.DataFrame, profile: pl.DataFrame | None, experiment: str) -> pl.DataFrame:
    """Decomposition rows of one experiment's timed rows (sweep's columns) and its profiled pass."""
    if timed.is_empty():
        return pl.DataFrame(schema=tables.schema("decomposition"))
    if profile is None:
        profile = pl.DataFrame(schema=tables.schema("sweep_profile"))
    prof = {(r["numerics"], r["implementation"], r["cell"]): r
            for r in profile.filter(pl.col("status") == "ok").iter_rows(named=True)}
    time_of = {(r["numerics"], r["implementation"], r["cell"]): r["time_ms"] for r in timed.iter_rows(named=True)}
    out = []
    for r in timed.iter_rows(named=True):
        key = (r["numerics"], r["implementation"], r["cell"])
        p = prof.get(key) or {}
        notes = []
        row = {"run_id": r["run_id"], "experiment": experiment, "numerics": r["numerics"],
               "implementation": r["implementation"], "cell": r["cell"], "batch_size": r["batch_size"], "resolution": r["resolution"],
               "transfer": r["transfer"], "time_ms": r["time_ms"], "transfer_ms": r["h2d_ms"],
               **{c: p.get(c) for c in ("host_issue_ms", "host_cpu_ms", "device_ms", "kernels", "launch_calls",
                                        "device_idle_ms")}}
        if not p:
            notes.append("no profiled pass for this cell")
        elif p.get("device_ms") is None:
            notes.append(p.get("device_message") or "no device time")
        levels = 0.0
        for level, (upper, lower) in LEVELS.items():
            a, b = time_of.get((r["numerics"], upper, r["cell"])), time_of.get((r["numerics"], lower, r["cell"]))
            carried = level in carries(r["implementation"])
            if a is None or b is None:
                row[f"{level}_ms"] = None
                if carried:
                    missing = " and ".join(n for n, t in ((upper, a), (lower, b)) if t is None)
                    notes.append(f"{level}: no ok {missing} row at this cell")
                    levels = None
                continue
            cost = max(a - b, 0.0)
            row[f"{level}_ms"] = cost if carried else 0.0
            if carried and levels is not None:
                levels += cost
        eager_device = prof.get((r["numerics"], "eager", r["cell"]), {}).get("device_ms")
        row["fusion_ms"] = (eager_device - row["device_ms"]
                            if _fused(r["implementation"]) and eager_device is not None
                            and row["device_ms"] is not None else None)
        known = [row["transfer_ms"], row["device_ms"], levels]
        row["other_ms"] = (r["time_ms"] - sum(known)) if all(v is not None for v in known) else None
        wall = p.get("wall_ms")
        row["bound"] = (None if row["device_idle_ms"] is None or not wall
                        else "host" if row["device_idle_ms"] / wall > HOST_BOUND_IDLE else "device")
        row["status"] = "ok" if row["other_ms"] is not None else "partial"
        row["message"] = "; ".join(notes) or None
        out.append(row)
    return tables.frame("decomposition", out)


def stacked(decomposition: pl.DataFrame) -> pl.DataFrame:
    """The figure's long form: (numerics, cell, implementation, component, ms) with components transfer, python,
    dispatch, launch, device work and other, each implementation's own levels only; nulls dropped."""
    components = {"transfer_ms": "transfer", "python_ms": "python", "dispatch_ms": "dispatch",
                  "launch_ms": "launch", "device_ms": "device work", "other_ms": "other"}
    long = decomposition.unpivot(index=["numerics", "cell", "batch_size", "resolution", "transfer", "implementation"],
                                 on=list(components), variable_name="column", value_name="ms")
    return long.drop_nulls("ms").with_columns(component=pl.col("column").replace_strict(components)).drop("column")
