"""Which GPUs a table's rows were measured on: a note under a comparison table whose rows (or the runs one derived
row summarises) came from more than one GPU, as they may on a box that times on every GPU at once
(measure/gpu_slots.py). GPUs of one model still differ a little (clocks, temperature, the silicon), so the note
says so, and how to measure each comparison on one GPU instead (gpus.pin_comparisons)."""
from __future__ import annotations

import polars as pl


def gpus_of(table: pl.DataFrame, environment: pl.DataFrame) -> pl.DataFrame:
    """The distinct GPUs (host, index, UUID, model) that measured the table's rows, by their run_ids; a derived
    row's comma-separated run_ids count each."""
    if table.is_empty() or environment.is_empty() or "run_id" not in table.columns:
        return pl.DataFrame(schema={"hostname": pl.String, "gpu_index": pl.Int64, "gpu_uuid": pl.String,
                                    "gpu_name": pl.String})
    run_ids = table.select(pl.col("run_id").str.split(",").explode().str.strip_chars()).unique()
    return (environment.filter(pl.col("gpu_uuid").is_not_null())
            .join(run_ids, on="run_id", how="semi")
            .select("hostname", "gpu_index", "gpu_uuid", "gpu_name").unique()
            .sort("hostname", "gpu_index", nulls_last=True))


def measured_on_note(table: pl.DataFrame, environment: pl.DataFrame) -> str | None:
    """A sentence for under the table when its rows came from more than one GPU; None when from one (or none)."""
    gpus = gpus_of(table, environment)
    if gpus.height < 2:
        return None
    hosts = gpus["hostname"].n_unique()
    names = sorted(set(gpus["gpu_name"].drop_nulls()))
    which = ", ".join(f"GPU {'?' if r['gpu_index'] is None else r['gpu_index']}"
                      + (f" of {r['hostname']}" if hosts > 1 else "") for r in gpus.iter_rows(named=True))
    if len(names) > 1:
        kind = f"of different models ({', '.join(names)}): rows of different GPUs are not comparable"
    else:
        kind = (f"of one model ({names[0] if names else 'unknown'}): rows compared across GPUs include "
                "the GPUs' own small differences (clocks, temperature)")
    return (f"Measured on {gpus.height} GPUs ({which}) {kind}. The environment table gives each row's GPU "
            "by run_id; config gpus.pin_comparisons: true measures every comparison on one GPU.")


def note_under(table: pl.DataFrame) -> None:
    """In a report chunk, right after a comparison table: the note, if its rows came from more than one GPU."""
    from . import page  # the page's display machinery, only where a report is rendered

    text = measured_on_note(table, page.load("environment"))
    if text is not None:
        page.note(text)
