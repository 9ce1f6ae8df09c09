"""Study B Fig. 5.9 (table vision_oracle_curve): the per-layer oracle curve. Along a model's blocks, the cumulative
time of eager, of every block compiled, of the best-of-two-runs oracle (each block in its faster state, no switch
charged) and of the dynamic programme's choice (its blocks in the state it chose, switch costs left out so that it
reads on the same scale), from vision_layer_summary's per-block medians. Where the oracle's line leaves the
compiled one is where selective compilation could gain."""
from __future__ import annotations

import polars as pl

from .. import tables

KEYS = ["model", "pair", "mode", "batch_size", "numerics", "memory_format", "method"]


def oracle_curve_rows(layers: pl.DataFrame) -> pl.DataFrame:
    rows = layers.filter(pl.col("eager_ms").is_not_null() & pl.col("compiled_ms").is_not_null())
    if rows.is_empty():
        return pl.DataFrame(schema=tables.schema("vision_oracle_curve"))
    chosen = (pl.when(pl.col("dp_compiled").is_null()).then(None).when(pl.col("dp_compiled"))
              .then(pl.col("compiled_ms")).otherwise(pl.col("eager_ms")))
    curve = rows.sort(*KEYS, "block").with_columns(
        eager_cum_ms=pl.col("eager_ms").cum_sum().over(KEYS),
        compiled_cum_ms=pl.col("compiled_ms").cum_sum().over(KEYS),
        oracle_cum_ms=pl.min_horizontal("eager_ms", "compiled_ms").cum_sum().over(KEYS),
        # null once a block has no choice recorded: the programme's line stops there
        dp_cum_ms=chosen.cum_sum().over(KEYS) + pl.when(chosen.is_null().cum_max().over(KEYS)).then(None)
        .otherwise(0.0))
    curve = curve.with_columns(oracle_speedup=pl.col("eager_cum_ms") / pl.col("oracle_cum_ms"))
    return tables.frame("vision_oracle_curve", curve.select(list(tables.schema("vision_oracle_curve"))))
