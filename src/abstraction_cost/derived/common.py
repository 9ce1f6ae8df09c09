"""Helpers the derived tables share."""
from __future__ import annotations

import polars as pl


def ok(df: pl.DataFrame, value: str | None = None) -> pl.DataFrame:
    """Rows with status ok (every row where the table has no status), and a value in `value` if named."""
    if "status" in df.columns:
        df = df.filter(pl.col("status") == "ok")
    return df.filter(pl.col(value).is_not_null()) if value else df


def span(series: pl.Series) -> str | None:
    """'5' or '5–20' for a count column; None where it has no value."""
    values = series.drop_nulls()
    if values.is_empty():
        return None
    low, high = values.min(), values.max()
    return f"{low}" if low == high else f"{low}–{high}"
