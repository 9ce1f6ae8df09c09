"""Achieved TFLOP/s against the peak of the same run (table roofline): each Study A sweep cell's and Study B vision
model's FLOPs per forward (table flops: convolutions and matmuls) over its median time, against the peak the matmul
study (study_b_matmul_speedups, GPU pair) reached on the same GPU in the same run: the best of eager and compiled
over its sizes, 2n³ FLOPs per call. The matmul study runs float32 under the run's global numerics (backend_flags.tf32),
so its peak is that numerics' (`peak_numerics`); a row of another numerics has no peak, and says so.
achieved_tflops counts the timed call (copy included); device_tflops the kernels' time alone (sweep_profile)."""
from __future__ import annotations

import polars as pl

from .. import tables

NO_PEAK = "no GPU matmul measured in this run (study_b.matmul gpu pair): no peak"
OTHER_NUMERICS = "the matmul study measured {peak} only; no peak for {numerics}"


def matmul_peak(speedups: pl.DataFrame) -> tuple[float | None, str | None, str | None]:
    """(TFLOP/s, what reached it, its run_id) of the matmul study's best GPU call; Nones without one."""
    rows = speedups.filter(pl.col("status") == "ok", pl.col("pair") == "gpu") if speedups.height else speedups
    best, what, run_id = None, None, None
    for r in rows.iter_rows(named=True):
        for side in ("eager", "compiled"):
            ms = r[f"{side}_median_ms"]
            if ms:
                tflops = 2 * r["n"] ** 3 / ms / 1e9
                if best is None or tflops > best:
                    best, what = tflops, f"matmul n={r['n']} {r['dtype']} {r[f'{side}_configuration']}"
                    run_id = r["run_id"]
    return best, what, run_id


def roofline_rows(flops: pl.DataFrame, sweep: pl.DataFrame, profile: pl.DataFrame, vision: pl.DataFrame,
                  matmul: pl.DataFrame, peak_numerics: str) -> pl.DataFrame:
    """Rows of table roofline: Study A's ok sweep cells and Study B's ok vision_speedups variants (and eager)."""
    peak, peak_of, peak_run = matmul_peak(matmul)
    counted = {(r["study"], r["model"], r["batch_size"], r["resolution"]): r
               for r in flops.iter_rows(named=True)} if flops.height else {}
    device = {(r["numerics"], r["implementation"], r["cell"]): r["device_ms"]
              for r in profile.filter(pl.col("status") == "ok").iter_rows(named=True)} if profile.height else {}
    cases = []
    for r in sweep.filter(pl.col("status") == "ok", pl.col("time_ms").is_not_null()).iter_rows(named=True) \
            if sweep.height else []:
        cases.append(("study_a", "resnet50", r["implementation"], r["numerics"], r["batch_size"], r["resolution"],
                      r["transfer"], r["time_ms"], device.get((r["numerics"], r["implementation"], r["cell"])),
                      r["run_id"]))
    for r in vision.filter(pl.col("status") == "ok", pl.col("pair") == "gpu").iter_rows(named=True) \
            if vision.height else []:
        variants = [(r["variant"], r["time_ms"])] + [("eager", r["eager_ms"])] * (r["variant"] == "compiled")
        for variant, ms in variants:
            cases.append(("study_b", r["model"], variant, r["numerics"], r["batch_size"], r["resolution"], None, ms,
                          None, r["run_id"]))
    out = []
    for study, model, impl, numerics, batch, resolution, transfer, ms, device_ms, run_id in cases:
        f = counted.get((study, model, batch, resolution))
        sources = {run_id, (f or {}).get("run_id"), peak_run if peak is not None and numerics == peak_numerics
                   else None}
        row = {"run_id": ",".join(sorted(s for s in sources if s)), "study": study, "model": model, "implementation": impl, "numerics": numerics,
               "batch_size": batch, "resolution": resolution, "transfer": transfer, "time_ms": ms,
               "device_ms": device_ms, "flops": None, "achieved_tflops": None, "device_tflops": None,
               "peak_tflops": None, "peak_of": peak_of, "fraction_of_peak": None, "status": "ok", "message": None}
        if f is None or f["flops"] is None:
            row.update(status="missing", message=(f or {}).get("message") or "no FLOP count for this input")
        elif not ms:
            row.update(status="missing", message="no time")
        else:
            row.update(flops=f["flops"], achieved_tflops=f["flops"] / ms / 1e9,
                       device_tflops=f["flops"] / device_ms / 1e9 if device_ms else None)
            if peak is None:
                row["message"] = NO_PEAK
            elif numerics != peak_numerics:
                row["message"] = OTHER_NUMERICS.format(peak=peak_numerics, numerics=numerics)
            else:
                row.update(peak_tflops=peak, fraction_of_peak=row["achieved_tflops"] / peak)
        out.append(row)
    if not out:
        return pl.DataFrame(schema=tables.schema("roofline"))
    return tables.frame("roofline", out)


def best_fraction(roofline: pl.DataFrame) -> dict | None:
    """Study A's best path: the row with the highest fraction of peak (None without a peak)."""
    rows = roofline.filter(pl.col("study") == "study_a", pl.col("fraction_of_peak").is_not_null())
    return None if rows.is_empty() else rows.sort("fraction_of_peak", descending=True).row(0, named=True)
