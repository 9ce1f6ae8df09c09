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
saved: eager's device_ms minus the build's. `bound` is host where the host took longer to issue the call than
the device was busy with it (host_issue_ms > wall_ms - device_idle_ms): the device then waits on the host
however the two overlap, so a faster host would shorten the call; else device.
A level whose pair lacks a row (an implementation not run, not ok) is null, and the message names what is missing;
without device times (no CUDA; CUPTI refused, or an ac_cudnn built without CUPTI) device work and other are null,
and the message says why (the profile's device_message); ac_cudnn's CUPTI trace gives cudnn and cudnn-graphs
theirs as the other implementations'.

Study B's end-to-end step (experiment vision_e2e): one row per model × pair × setting (batch, numerics, memory
format) × variant (`implementation`: eager, eager_channels_last, eager_cuda_graphs, the clean process's, one row
each, `mode` null; compiled and eager_in_process per compile `mode`), `cell` null. time_ms is the variant's
vision_e2e time (the median of its invocations' medians, as vision_speedups), set beside its profiled pass
(vision_profile). Study B has no pair of implementations that differs by python, dispatch or launch alone (a CUDA
graph of eager drops all three at once), so its levels are:
- transfer: 0 (the inputs are on the device before the timed call; it copies nothing from the host);
- host (host_ms; python + dispatch + launch together, python_ms, dispatch_ms and launch_ms null): the time the
  device waits on the host, wall - device busy of the profiled pass (its device_idle_ms): for eager the
  interpreter, ATen's dispatcher and one launch per kernel; for compiled Dynamo's guards and the generated
  code's launches; for a CUDA graph the replay's;
- device work: the kernels' summed time (vision_profile.device_ms);
- other: time - host - device work (the timed call's median against the profiled pass's, copies and overlap;
  negative where host and device work overlap);
- fusion saved (fusion_ms, compiled rows): eager's device_ms - the compiled variant's, the kernel time fusion and
  Inductor's kernels saved;
- launch saved (launch_saved_ms, eager_cuda_graphs rows): eager's time - the graph's, what replaying eager's
  kernels from one CUDA graph saves (the host levels, launches among them: same kernels, one launch call).
A row is `partial` with the message where a level cannot be separated: no device time (the CPU pair, where host
and device work are one thread's; no CUPTI: the profile's device_message), no profiled pass, or no eager row for
fusion or launch saved."""
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
VISION_KEYS = ["model", "pair", "batch_size", "resolution", "numerics", "memory_format"]
CLEAN_PROCESS = "clean"  # vision_e2e.process of eager and its baselines: one measurement, repeated under every mode


def carries(implementation: str) -> tuple[str, ...]:
    """The levels an implementation's call passes through; compiled builds run Dynamo's guards and launch the
    generated kernels one by one."""
    if implementation.startswith("compiled"):
        return ("launch",)
    return CARRIES.get(implementation, ())


def _fused(implementation: str) -> bool:
    return implementation.startswith("compiled") or implementation in FUSED


def bound(profile: dict) -> str | None:
    """host | device (the module docstring), None without the profile's host issue, wall and idle times."""
    issue, wall, idle = (profile.get(c) for c in ("host_issue_ms", "wall_ms", "device_idle_ms"))
    if None in (issue, wall, idle):
        return None
    return "host" if issue > wall - idle else "device"


def decomposition_rows(sweep: pl.DataFrame, profile: pl.DataFrame, backend_comparison: pl.DataFrame | None = None,
                       backend_eval: pl.DataFrame | None = None,
                       backend_profile: pl.DataFrame | None = None, vision_e2e: pl.DataFrame | None = None,
                       vision_profile: pl.DataFrame | None = None) -> pl.DataFrame:
    """Rows of table decomposition: every ok sweep row of the interleaved sweep (experiment sweep), then every ok
    backend_comparison row (experiment backend_comparison) where the comparison's tables are given, then every
    Study B end-to-end variant with an ok timed call (experiment vision_e2e) where vision_e2e is given, each with
    its profile where it has one."""
    frames = [_rows(sweep.filter(pl.col("status") == "ok", pl.col("time_ms").is_not_null()), profile, "sweep")]
    if backend_comparison is not None:
        profiled = None if backend_profile is None else backend_profile.with_columns(cell=pl.lit(0, pl.Int64))
        frames.append(_rows(backend_timed(backend_comparison, backend_eval), profiled, "backend_comparison"))
    if vision_e2e is not None:
        frames.append(vision_rows(vision_e2e, vision_profile))
    return pl.concat(frames, how="vertical")


def _clean_once(df: pl.DataFrame) -> pl.DataFrame:
    """The clean process's rows once (mode null): vision_e2e and vision_profile repeat them under every mode."""
    return df.with_columns(mode=pl.when(pl.col("process") == CLEAN_PROCESS).then(pl.lit(None, pl.String))
                           .otherwise(pl.col("mode"))).unique(maintain_order=True)


def vision_timed(e2e: pl.DataFrame) -> pl.DataFrame:
    """Per (VISION_KEYS, mode, variant): the ok timed calls' median over each invocation, then over invocations
    (vision_summary's estimate), with the run_id and configuration."""
    ok = _clean_once(e2e.filter(pl.col("status") == "ok", pl.col("time_ms").is_not_null())
                     .select(*VISION_KEYS, "mode", "variant", "process", "configuration", "invocation", "round",
                             "repeat", "time_ms", "run_id"))
    keys = [*VISION_KEYS, "mode", "variant"]
    per = ok.group_by(*keys, "invocation").agg(pl.col("time_ms").median(), pl.col("process").first(),
                                               pl.col("configuration").first(), pl.col("run_id").first())
    return per.group_by(keys).agg(pl.col("time_ms").median(), pl.col("process").first(),
                                  pl.col("configuration").first(),
                                  pl.col("run_id").unique().sort().str.join(","))


def vision_rows(e2e: pl.DataFrame, profile: pl.DataFrame | None) -> pl.DataFrame:
    """Decomposition rows of Study B's end-to-end variants (experiment vision_e2e; the module docstring says what
    each level is there)."""
    if e2e.is_empty() or e2e.filter(pl.col("status") == "ok", pl.col("time_ms").is_not_null()).is_empty():
        return pl.DataFrame(schema=tables.schema("decomposition"))
    timed = vision_timed(e2e)
    if profile is None:
        profile = pl.DataFrame(schema=tables.schema("vision_profile"))
    keys = [*VISION_KEYS, "mode", "variant"]
    prof = {tuple(r[k] for k in keys): r for r in _clean_once(profile).iter_rows(named=True)}
    time_of = {tuple(r[k] for k in keys): r["time_ms"] for r in timed.iter_rows(named=True)}
    out = []
    for r in timed.sort(keys, nulls_last=False).iter_rows(named=True):
        key = tuple(r[k] for k in keys)
        eager_key = (*key[:len(VISION_KEYS)], None, "eager")
        p = prof.get(key) or {}
        notes = []
        if not p:
            notes.append("no profiled pass for this variant")
        elif p.get("status") != "ok":
            notes.append(f"profiled pass {p.get('status')}: {p.get('message')}")
        elif p.get("device_ms") is None:
            notes.append(p.get("device_message") or "no device time")
        ok = p.get("status") == "ok"
        col = (lambda c: p.get(c) if ok else None)   # noqa: E731
        row = {"run_id": r["run_id"], "experiment": "vision_e2e", "numerics": r["numerics"],
               "implementation": r["variant"], "cell": None, "batch_size": r["batch_size"],
               "resolution": r["resolution"], "transfer": None, "model": r["model"], "pair": r["pair"],
               "memory_format": r["memory_format"], "mode": r["mode"], "time_ms": r["time_ms"],
               "transfer_ms": 0.0, "python_ms": None, "dispatch_ms": None, "launch_ms": None,
               **{c: col(c) for c in ("host_issue_ms", "host_cpu_ms", "device_ms", "kernels", "launch_calls",
                                     "device_idle_ms")}}
        row["host_ms"] = row["device_idle_ms"] if row["device_ms"] is not None else None
        row["other_ms"] = (r["time_ms"] - row["transfer_ms"] - row["host_ms"] - row["device_ms"]
                           if row["host_ms"] is not None else None)
        row["fusion_ms"] = row["launch_saved_ms"] = None
        if r["variant"] == "compiled":
            eager = prof.get(eager_key) or {}
            eager_device = eager.get("device_ms") if eager.get("status") == "ok" else None
            if eager_device is not None and row["device_ms"] is not None:
                row["fusion_ms"] = eager_device - row["device_ms"]
            else:
                notes.append("fusion saved: no device time of " + ("eager" if eager_device is None else "this variant"))
        if r["variant"] == "eager_cuda_graphs":
            eager_time = time_of.get(eager_key)
            if eager_time is not None:
                row["launch_saved_ms"] = eager_time - r["time_ms"]
            else:
                notes.append("launch saved: no ok eager time in this setting")
        row["bound"] = bound(p) if ok and row["device_ms"] is not None else None
        row["status"] = "ok" if row["other_ms"] is not None and not notes else "partial"
        row["message"] = "; ".join(notes) or None
        out.append(row)
    return tables.frame("decomposition", out)


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
               **dict.fromkeys(("model", "pair", "memory_format", "mode", "host_ms", "launch_saved_ms")),
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
        row["bound"] = bound(p)
        row["status"] = "ok" if row["other_ms"] is not None else "partial"
        row["message"] = "; ".join(notes) or None
        out.append(row)
    return tables.frame("decomposition", out)


def vision_stacked(decomposition: pl.DataFrame, extra: tuple[str, ...] = ()) -> pl.DataFrame:
    """The Study B figure's long form: (model, pair, setting, variant label, component, ms) with components host,
    device work and other, and the `extra` columns kept; nulls dropped."""
    rows = decomposition.filter(pl.col("experiment") == "vision_e2e").with_columns(
        label=pl.when(pl.col("mode").is_null()).then(pl.col("implementation"))
        .otherwise(pl.format("{} ({})", "implementation", "mode")))
    components = {"host_ms": "host (python + dispatch + launch)", "device_ms": "device work", "other_ms": "other"}
    index = ["model", "pair", "batch_size", "resolution", "numerics", "memory_format", "mode", "implementation",
             "label", *(c for c in extra if c in rows.columns)]
    long = rows.unpivot(index=index, on=list(components), variable_name="column", value_name="ms")
    return long.drop_nulls("ms").with_columns(component=pl.col("column").replace_strict(components)).drop("column")


def stacked(decomposition: pl.DataFrame) -> pl.DataFrame:
    """The figure's long form: (numerics, cell, implementation, component, ms) with components transfer, python,
    dispatch, launch, device work and other, each implementation's own levels only; nulls dropped."""
    components = {"transfer_ms": "transfer", "python_ms": "python", "dispatch_ms": "dispatch",
                  "launch_ms": "launch", "device_ms": "device work", "other_ms": "other"}
    long = decomposition.unpivot(index=["numerics", "cell", "batch_size", "resolution", "transfer", "implementation"],
                                 on=list(components), variable_name="column", value_name="ms")
    return long.drop_nulls("ms").with_columns(component=pl.col("column").replace_strict(components)).drop("column")
