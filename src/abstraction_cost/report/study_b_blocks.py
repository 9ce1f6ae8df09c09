"""Study B building blocks: the counterparts of the study's Fig. 5.1, 5.3, 5.4 and 5.5.

Every chart draws a speedup table computed by rule (study_b_block_speedups, study_b_resnet50_conv_speedups):
the speedup median(eager) / median(compiled) as a point with its bootstrap interval as a bar, a rule at 1.0,
and hollow points where the interval includes 1.0 (the data cannot tell a speedup from a slowdown). Rows whose
status is not ok are left out of the charts; the report's failures section lists them.
"""
from __future__ import annotations

import altair as alt
import polars as pl

from . import page

INTERVAL_LEGEND = "interval includes 1.0"
PAIR_TITLE = "pair (eager vs compiled)"
PAIR_LABELS = {"cpu": "cpu: interp vs cpp", "gpu": "gpu: cuda vs triton"}


def _ok(df: pl.DataFrame, prefix: str = "") -> pl.DataFrame:
    status = f"{prefix}status"
    return df.filter((pl.col(status) == "ok") & pl.col(f"{prefix}speedup").is_not_null())


def _with_labels(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(pl.col("pair").replace(PAIR_LABELS).alias("pair_label"))


def _speedup_layers(base: alt.Chart, x: alt.X, color: str, color_title: str) -> alt.LayerChart:
    y = alt.Y("speedup:Q", scale=alt.Scale(type="log"), title="speedup (eager / compiled, log)")
    bars = base.mark_rule().encode(x=x, y=alt.Y("speedup_low:Q", scale=alt.Scale(type="log")), y2="speedup_high:Q",
                                   color=alt.Color(f"{color}:N", title=color_title))
    # filled: the interval excludes 1.0; hollow (white fill, coloured outline): it includes 1.0
    points = base.mark_point(size=70, strokeWidth=2, opacity=1, fillOpacity=1).encode(
        x=x, y=y, color=alt.Color(f"{color}:N", title=color_title),
        fill=alt.condition(alt.datum.speedup_includes_one, alt.value("white"), alt.Color(f"{color}:N")),
        shape=alt.Shape("speedup_includes_one:N", title=INTERVAL_LEGEND),
        tooltip=[f"{color}:N", "pair:N", "mode:N", alt.Tooltip("speedup:Q", format=".3f"),
                 alt.Tooltip("speedup_low:Q", format=".3f"), alt.Tooltip("speedup_high:Q", format=".3f")])
    one = alt.Chart().mark_rule(strokeDash=[4, 3], color="gray").encode(y=alt.datum(1.0))
    return alt.layer(bars, points, one)


def _faceted(layers: alt.LayerChart, data, column: str | None, row: str | None, title: str) -> alt.FacetChart:
    facet = {}
    if column:
        facet["column"] = alt.Column(f"{column}:N", title=column.replace("_", " "))
    if row:
        facet["row"] = alt.Row(f"{row}:N", title=row.replace("_", " "))
    return layers.properties(width=260, height=200).facet(data=data, **facet).properties(title=title)


def _frame(df: pl.DataFrame):
    return df.drop("run_id", strict=False)


def matmul_figure(speedups: pl.DataFrame) -> alt.FacetChart | None:
    """Fig. 5.1 counterpart: matmul speedup against n, a colour per pair, a panel per compile mode."""
    ok = _ok(speedups)
    if ok.is_empty():
        return None
    data = _frame(_with_labels(ok))
    base = alt.Chart()
    x = alt.X("n:Q", scale=alt.Scale(type="log"), title="n (square n×n, log)", axis=page.ticks_at(ok["n"]))
    layers = _speedup_layers(base, x, "pair_label", PAIR_TITLE)
    return _faceted(layers, data, "mode", None, "Matmul: compiled against eager")


def matmul_time_figure(speedups: pl.DataFrame) -> alt.FacetChart | None:
    """Fig. 5.1 as the study drew it: median time against n for the four configurations, per mode; NumPy's matmul
    on the CPU pair's inputs beside them (App. Fig. 1), where the table has it."""
    ok = _ok(speedups)
    if ok.is_empty():
        return None
    parts = [
        ok.select("n", "mode", pl.col("eager_configuration").alias("configuration"),
                  pl.col("eager_median_ms").alias("median_ms")),
        ok.select("n", "mode", pl.col("compiled_configuration").alias("configuration"),
                  pl.col("compiled_median_ms").alias("median_ms")),
    ]
    if "numpy_median_ms" in ok.columns:
        parts.append(ok.filter(pl.col("numpy_median_ms").is_not_null()).select(
            "n", "mode", pl.lit("numpy").alias("configuration"), pl.col("numpy_median_ms").alias("median_ms")))
    long = pl.concat(parts)
    chart = alt.Chart().mark_line(point=True).encode(
        x=alt.X("n:Q", scale=alt.Scale(type="log"), title="n (log)", axis=page.ticks_at(ok["n"])),
        y=alt.Y("median_ms:Q", scale=alt.Scale(type="log"), title="median time per call (ms, log)"),
        color=alt.Color("configuration:N", sort=["interp", "cpp", "numpy", "cuda", "triton"]),
        tooltip=["configuration", "mode", "n", "median_ms"])
    return chart.properties(width=260, height=200).facet(data=_frame(long), column=alt.Column("mode:N")).properties(
        title="Matmul: median time per configuration")


def ablation_figure(speedups: pl.DataFrame) -> alt.FacetChart | None:
    """Fig. 5.3 counterpart: speedup against kernel size, a colour per padding, panels stride × mode."""
    ok = _ok(speedups)
    if ok.is_empty():
        return None
    data = _frame(_with_labels(ok).with_columns(
        (pl.col("pair") + " stride " + pl.col("stride").cast(pl.String)).alias("pair_stride")))
    x = alt.X("kernel:O", title="square kernel size")
    layers = _speedup_layers(alt.Chart(), x, "padding", "padding")
    return _faceted(layers, data, "pair_stride", "mode", "Convolution ablation: compiled against eager")


def resnet_long(joined: pl.DataFrame) -> pl.DataFrame:
    """The joined ResNet-50 table as one row per (convolution, pair, mode, method), ok rows only."""
    parts = []
    for method in ("isolated", "in_model"):
        cols = {f"{method}_{k}": k for k in ("status", "speedup", "speedup_low", "speedup_high",
                                             "speedup_includes_one")}
        part = joined.select("conv_id", "in_channels", "out_channels", "kernel", "stride", "input_size",
                             "occurrences", "pair", "mode", *cols).rename(cols)
        parts.append(part.with_columns(pl.lit(method.replace("_", "-")).alias("method")))
    long = pl.concat(parts)
    return _ok(long).with_columns(
        pl.format("{} {}x{}/{} {}→{} @{}", "conv_id", "kernel", "kernel", "stride", "in_channels",
                  "out_channels", "input_size").alias("convolution"))


def resnet_figure(joined: pl.DataFrame) -> alt.FacetChart | None:
    """Fig. 5.4 counterpart: per distinct ResNet-50 convolution, isolated (end to end) and in-model (profiler)."""
    long = resnet_long(joined)
    if long.is_empty():
        return None
    x = alt.X("convolution:N", sort=None, title="distinct convolution (id kernel/stride in→out @input)")
    layers = _speedup_layers(alt.Chart(), x, "method", "timed")
    return layers.properties(width=520, height=220).facet(
        data=_frame(long), row=alt.Row("pair:N"), column=alt.Column("mode:N")).properties(
        title="ResNet-50 convolutions: isolated against inside the model")


def blocks_figure(speedups: pl.DataFrame) -> alt.FacetChart | None:
    """Fig. 5.5 counterpart: speedup against the number of convolutions in the block."""
    ok = _ok(speedups)
    if ok.is_empty():
        return None
    x = alt.X("n:O", title="convolutions in the block (N)")
    layers = _speedup_layers(alt.Chart(), x, "pair_label", PAIR_TITLE)
    return _faceted(layers, _frame(_with_labels(ok)), "mode", None, "Convolution blocks: compiled against eager")


HEADLINE_COLUMNS = ["result", "pair", "mode", "status", "eager_median_ms", "compiled_median_ms", "speedup",
                    "speedup_low", "speedup_high", "speedup_includes_one", "compiled_first_call_ms", "message"]


def headline(matmul: pl.DataFrame, ablation: pl.DataFrame, blocks: pl.DataFrame, matmul_n: int = 4096) -> pl.DataFrame:
    """The rows the issue asks to be read off: matmul at n = matmul_n, the ablation's kernels 1 and 5 at stride 1
    padding 1, and the block at the largest N (rows selected from the speedup tables, nothing computed)."""
    parts = []
    if not matmul.is_empty():
        parts.append(matmul.filter(pl.col("n") == matmul_n).with_columns(
            pl.format("matmul n={}", "n").alias("result")))
    if not ablation.is_empty():
        parts.append(ablation.filter(pl.col("kernel").is_in([1, 5]) & (pl.col("stride") == 1)
                                     & (pl.col("padding") == 1)).with_columns(
            pl.format("conv kernel {} stride 1 padding 1", "kernel").alias("result")))
    if not blocks.is_empty():
        parts.append(blocks.filter(pl.col("n") == pl.col("n").max()).with_columns(
            pl.format("conv block N={}", "n").alias("result")))
    parts = [p.select(HEADLINE_COLUMNS) for p in parts if not p.is_empty()]
    return pl.concat(parts) if parts else pl.DataFrame(schema={c: pl.String for c in HEADLINE_COLUMNS})


SPEEDUP_FORMATS = {"eager_median_ms": "{:.4g}", "compiled_median_ms": "{:.4g}", "speedup": "{:.3f}",
                   "speedup_low": "{:.3f}", "speedup_high": "{:.3f}", "compiled_first_call_ms": "{:.0f}"}


def display(speedups: pl.DataFrame) -> pl.DataFrame:
    """A speedup table for the page: without run_id (the environment table joins on it, readers need not)."""
    return speedups.drop("run_id", "isolated_run_id", strict=False)
