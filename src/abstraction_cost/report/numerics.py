"""Which numerics every table the report draws was measured in, for the statement at the top of the report.

A table with a `numerics` column (Study A's backend comparison, Study B's vision models) says so on every row;
for the others the numerics are the TF32 flags of the environment rows their run_ids join: `fp32` (TF32 off),
`tf32` (TF32 on), or `fp32` on the CPU, which has no TF32.
"""
from __future__ import annotations

import polars as pl

from ..measure.numerics import NUMERICS

SCHEMA = {"table": pl.String, "numerics": pl.String, "from": pl.String}


def _env_numerics(env: pl.DataFrame) -> dict[str, str]:
    """run_id -> fp32 | tf32 from the environment rows."""
    out = {}
    for r in env.iter_rows(named=True):
        tf32 = r.get("device") == "cuda" and bool(r.get("tf32_cudnn") or r.get("tf32_matmul"))
        out[r["run_id"]] = "tf32" if tf32 else "fp32"
    return out


def _ordered(values: set[str]) -> str:
    rank = {n: i for i, n in enumerate(NUMERICS)}
    return ", ".join(sorted(values, key=lambda v: (rank.get(v, len(rank)), v)))


def numerics_by_table(frames: dict[str, pl.DataFrame], env: pl.DataFrame) -> pl.DataFrame:
    """One row per measured table with rows: the numerics its ok rows were measured in, and where that is read."""
    by_run = _env_numerics(env) if "run_id" in env.columns else {}
    rows = []
    for name, df in sorted(frames.items()):
        if name == "environment" or df.is_empty() or "run_id" not in df.columns:
            continue
        ok = df.filter(pl.col("status") == "ok") if "status" in df.columns else df
        if ok.is_empty():
            continue
        if "numerics" in ok.columns:
            values = set(ok["numerics"].drop_nulls().to_list())
            source = "its numerics column"
        else:
            ids = {i for cell in ok["run_id"].drop_nulls().to_list() for i in cell.split(",")}
            values = {by_run[i] for i in ids if i in by_run}
            source = "the TF32 flags of its jobs' environment rows"
        rows.append({"table": name, "numerics": _ordered(values) if values else "unknown (no environment row)",
                     "from": source})
    return pl.DataFrame(rows, schema=SCHEMA)
