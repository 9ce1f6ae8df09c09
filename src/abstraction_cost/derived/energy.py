"""Energy per sample (table energy), beside time: NVML's mean board power over a phase × that phase's median time
per sample. Study A's sweep cells (power over the cell: inputs, warm-up, timed calls) and backend comparison (power
over the implementation's eval phase, from backend_eval). NVML's power is the whole GPU's, so a job beside another
on the same GPU reads both; a phase NVML took no sample of has no energy (status missing, with the reason)."""
from __future__ import annotations

import polars as pl

from .. import tables
from .common import ok

NO_SAMPLE = ("NVML took no power sample in this phase (shorter than measure.nvml_interval_ms, or NVML "
             "unavailable): no energy")
COLUMNS = ["run_id", "experiment", "implementation", "numerics", "transfer", "batch_size", "resolution",
           "time_per_sample_ms", "power_w_mean", "nvml_samples", "gpu_util_mean_pct"]


def _with_energy(rows: pl.DataFrame) -> pl.DataFrame:
    sampled = pl.col("power_w_mean").is_not_null() & (pl.col("nvml_samples").fill_null(0) > 0)
    return rows.with_columns(
        energy_per_sample_j=pl.when(sampled).then(pl.col("power_w_mean") * pl.col("time_per_sample_ms") / 1000),
        status=pl.when(sampled).then(pl.lit("ok")).otherwise(pl.lit("missing")),
        message=pl.when(sampled).then(pl.lit(None, pl.String)).otherwise(pl.lit(NO_SAMPLE)))


def energy_rows(sweep: pl.DataFrame, comparison: pl.DataFrame, backend_eval: pl.DataFrame) -> pl.DataFrame:
    """Rows of table energy from the sweep, the backend comparison and its per-call table."""
    parts = []
    cells = ok(sweep, "time_per_sample_ms")
    if cells.height:
        parts.append(cells.with_columns(experiment=pl.lit("sweep")).select(COLUMNS))
    compared = ok(comparison, "time_per_sample_ms")
    if compared.height:
        keys = ["implementation", "numerics"]
        phase = (backend_eval.filter(pl.col("status") == "ok").group_by(keys)
                 .agg(pl.col("power_w_mean").first(), pl.col("nvml_samples").first(),
                      pl.col("gpu_util_mean_pct").first()))
        parts.append(compared.join(phase, on=keys, how="left").with_columns(
            experiment=pl.lit("backend_comparison"), transfer=pl.lit(None, pl.String)).select(COLUMNS))
    if not parts:
        return pl.DataFrame(schema=tables.schema("energy"))
    both = _with_energy(pl.concat(parts, how="vertical_relaxed"))
    return tables.frame("energy", both.select(list(tables.schema("energy"))))
