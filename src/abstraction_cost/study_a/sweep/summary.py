"""What the report sets beside the study's numbers: the host-to-device copy at the study's point (batch 32 at
the kernel resolution; the study's 25.166 MB is 32 × 3 × 256² float32), the study's ReLU kernel rows and the
measured kernel rows kept beside them (top_rows), and each implementation's speed against eager per cell from the
interleaved sweep's paired turns. No torch: the sweep's concat and summary jobs import this."""
from __future__ import annotations

import re

import polars as pl

from ...measure.statistics import paired_speedup
from ...tables.study_a_sweep import STUDY_H2D, STUDY_RELU, STUDY_TRANSFER

STUDY_RUN_ID = "study:levental-orlova-2021"  # the study's reference rows: no measuring job of this pipeline
# ReLU kernels: ATen's ReLU is a clamp at 0 (launch_clamp_scalar), ac_cudnn's are relu_kernel and add_relu_kernel
RELU = re.compile("relu|clamp", re.IGNORECASE)


def kept(ranked: list, top: int, name) -> list[tuple[int, object]]:
    """(rank, item) of the `top` first of `ranked` and, below them, every ReLU kernel: the study's kernel finding
    compares ReLU launches, which are rarely among the top ones. name(item) is the item's kernel name."""
    return [(i + 1, item) for i, item in enumerate(ranked) if i < top or RELU.search(name(item))]


def top_rows(kernels: pl.DataFrame, top: int) -> pl.DataFrame:
    """The kernel table's rows within kernels.top, and every ReLU kernel below them (kept), and every row
    without a rank (not_run, error): what rule concat_sweep_kernels keeps of the ranked rows."""
    return kernels.filter(pl.col("rank").is_null() | (pl.col("rank") <= top)
                          | pl.col("kernel").str.contains(RELU.pattern))


def point_resolution(resolutions, wanted: int) -> int:
    """The grid's resolution nearest the wanted one (the wanted one when the grid has it)."""
    return min(resolutions, key=lambda r: (abs(r - wanted), r))


def h2d_rows(sweep: pl.DataFrame, batch: int, resolution: int) -> pl.DataFrame:
    """One row per (numerics, implementation, transfer) at (batch, nearest resolution); the study's numbers on the
    rows of the transfer the study measured (eager as the study's PyTorch, the others as its other
    implementations)."""
    if sweep.is_empty():
        return pl.DataFrame()
    at = sweep.filter((pl.col("batch_size") == batch)
                      & (pl.col("resolution") == point_resolution(sweep["resolution"].unique().to_list(), resolution)))
    rows = []
    for r in at.sort("numerics", "implementation", "transfer").iter_rows(named=True):
        study = STUDY_H2D["pytorch" if r["implementation"] == "eager" else "others"]
        measured_here = r["transfer"] == STUDY_TRANSFER
        rows.append({k: r[k] for k in ("run_id", "implementation", "backend", "runtime", "transfer", "numerics",
                                       "device", "dataset", "batch_size", "resolution", "status", "message",
                                       "h2d_bytes", "h2d_ms", "h2d_ms_low", "h2d_ms_high")}
                    | {"h2d_mb": None if r["h2d_bytes"] is None else r["h2d_bytes"] / 1e6,
                       "study_h2d_mb": study["bytes"] / 1e6 if measured_here else None,
                       "study_h2d_ms": study["ms"] if measured_here else None})
    return pl.DataFrame(rows)


def study_kernel_rows() -> list[dict]:
    """The study's ReLU finding as rows of sweep_kernels (source "study")."""
    return [{"run_id": STUDY_RUN_ID, "implementation": f"study: {who}", "transfer": STUDY_TRANSFER,
             "numerics": None, "device": "cuda", "batch_size": 32, "resolution": None, "source": "study",
             "status": "ok",
             "message": "Levental & Orlova 2021, profiler section (NVIDIA Visual Profiler); ~12% of execution time",
             "rank": None, "kernel": "relu", "calls": None, "total_us": None, "mean_us": v["mean_us"],
             "share": 0.12, "grid": v["grid"], "block": None}
            for who, v in STUDY_RELU.items()]


def speedup_rows(sweep: pl.DataFrame, blocks: pl.DataFrame, baseline: str = "eager",
                 resamples: int = 2_000) -> list[dict]:
    """Per (numerics, implementation, cell) measured beside the baseline: the baseline's time over the
    implementation's, from the turns both had in the same invocations (turn t of each ran back to back), resampled
    as pairs (measure/statistics.paired_speedup). A cell whose turns do not pair (one implementation at a time:
    above interleave_max_pixels) gets the ratio of the rows' medians and no interval."""
    keys = ["numerics", "cell"]
    cells = sweep.filter(pl.col("status") == "ok").select(
        *keys, "implementation", "batch_size", "resolution", "transfer", "time_ms", "run_id")
    base = cells.filter(pl.col("implementation") == baseline)
    rows = []
    for r in cells.filter(pl.col("implementation") != baseline).join(
            base.select(*keys, pl.col("time_ms").alias("baseline_ms")), on=keys).iter_rows(named=True):
        mine = blocks.filter((pl.col("numerics") == r["numerics"]) & (pl.col("cell") == r["cell"]))
        paired = mine.filter(pl.col("implementation") == r["implementation"]).join(
            mine.filter(pl.col("implementation") == baseline), on=["invocation", "turn"], suffix="_base")
        row = {k: r[k] for k in ("run_id", "numerics", "implementation", "cell", "batch_size", "resolution",
                                 "transfer")}
        row.update(baseline=baseline, speedup=r["baseline_ms"] / r["time_ms"], speedup_low=None, speedup_high=None,
                   speedup_includes_one=None, paired_turns=paired.height)
        if paired.height:
            groups = paired.sort("invocation", "turn").partition_by("invocation", maintain_order=True)
            s = paired_speedup([g["time_ms_base"].to_list() for g in groups], [g["time_ms"].to_list() for g in groups],
                               resamples=resamples)
            row.update(s.columns("speedup"))
        rows.append(row)
    return rows
