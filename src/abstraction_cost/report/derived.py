"""Figures and tables of the derived tables (derived/*.py, computed by the rules of workflow/rules/derived.smk):
how precise the numbers are, energy per sample, compile break-even, Study B's per-layer oracle curve (Fig. 5.9) and
the convolution speedup predictor (Fig. 5.4). These functions select, rename and draw; nothing is computed here."""
from __future__ import annotations

import altair as alt
import polars as pl

from . import page, verdicts


# ------------------------------------------------------------------------------------------- precision
def precision_display(precision: pl.DataFrame) -> pl.DataFrame:
    if precision.is_empty():
        return precision
    return precision.select(
        "experiment", "quantity", "rows", pl.col("rows_with_interval").alias("with an interval"),
        pl.col("rel_width_median").alias("interval width / value, median"),
        pl.col("rel_width_p90").alias("90th percentile"), pl.col("rel_width_max").alias("largest"),
        pl.col("includes_one").alias("ratios whose interval holds 1"),
        pl.col("warmup_calls").alias("warm-up calls"), pl.col("timed_calls").alias("timed calls"),
        "invocations", "spread", pl.col("spread_measure").alias("spread is"))


def precision_finding(precision: pl.DataFrame) -> str:
    """What the intervals cover: one process per row, unless the table counts invocations."""
    if precision.is_empty():
        return "Not measured here: no experiment has rows with intervals."
    single = precision.filter(pl.col("invocations") == "1")["experiment"].unique().sort().to_list()
    text = ("Each interval is a bootstrap 95% interval of a median: over the timed calls of its row, or, where a "
            "table counts invocations, over its invocations and then the calls within each. ")
    if single:
        text += (f"In {', '.join(single)} every row was measured in one process, so its interval describes that "
                 "process at that moment: the spread between processes and over minutes is not in it, and two "
                 "rows whose intervals do not overlap may still not differ in a second run. ")
    ratios = precision.filter(pl.col("includes_one").is_not_null())
    if ratios.height:
        undecided = ", ".join(f"{r['experiment']} {r['includes_one']} of {r['rows_with_interval']}"
                              for r in ratios.iter_rows(named=True) if r["rows_with_interval"])
        text += f"Ratios with no measurable difference from 1 at this precision: {undecided}."
    return text.strip()


PRECISION_FORMATS = {"interval width / value, median": "{:.1%}", "90th percentile": "{:.1%}", "largest": "{:.1%}",
                     "spread": "{:.1%}"}


# ---------------------------------------------------------------------------------------------- energy
def energy_display(energy: pl.DataFrame) -> pl.DataFrame:
    """The backend comparison's energy per sample beside its time (the sweep's is drawn)."""
    rows = energy.filter(pl.col("experiment") == "backend_comparison")
    if rows.is_empty():
        return rows
    return rows.select("numerics", "implementation", "batch_size", "resolution",
                       pl.col("time_per_sample_ms").alias("ms/sample, median"),
                       pl.col("power_w_mean").alias("mean power (W, NVML, device-wide)"),
                       pl.col("nvml_samples").alias("NVML samples"),
                       pl.col("energy_per_sample_j").alias("energy per sample (J)"), "status", "message")


ENERGY_FORMATS = {"ms/sample, median": "{:.3f}", "mean power (W, NVML, device-wide)": "{:.0f}",
                  "energy per sample (J)": "{:.4f}"}


# ---------------------------------------------------------------------------------------------- break-even
def breakeven_figure(breakeven: pl.DataFrame) -> alt.TopLevelMixin | None:
    """Calls to pay for the build, per build and case (log scale), the speedup interval's range as a bar; builds
    that are not measurably faster than eager have no point (see the table)."""
    data = breakeven.filter(pl.col("breakeven_calls").is_not_null() & (pl.col("breakeven_calls") > 0))
    if data.is_empty():
        return None
    data = data.with_columns(pl.format("{} · {}", "implementation", "case").alias("build"),
                             pl.col("numerics").fill_null("fp32 (TF32 per environment)"))
    x = alt.X("breakeven_calls:Q", scale=alt.Scale(type="log"), title="calls until the build pays for itself (log)")
    y = alt.Y("build:N", title=None, sort=alt.EncodingSortField("breakeven_calls"))
    tooltip = ["experiment", "implementation", "case", "numerics", "batch_size", "resolution", "build_s",
               "eager_ms", "time_ms", "speedup", "breakeven_calls", "breakeven_calls_low", "breakeven_calls_high"]
    points = alt.Chart().mark_point(filled=True, size=50).encode(x=x, y=y, color="numerics:N", tooltip=tooltip)
    bars = alt.Chart().transform_filter("isValid(datum.breakeven_calls_high)").mark_rule().encode(
        x="breakeven_calls_low:Q", x2="breakeven_calls_high:Q", y=y, color="numerics:N")
    return (alt.layer(bars, points, data=data).properties(width=420)
            .facet(row=alt.Row("experiment:N", title=None, header=page.row_labels()))
            .resolve_scale(y="independent"))


def breakeven_display(breakeven: pl.DataFrame) -> pl.DataFrame:
    if breakeven.is_empty():
        return breakeven
    return breakeven.select(
        "experiment", "implementation", "case", "numerics", "batch_size", "resolution", "build_s", "build_source",
        pl.col("eager_ms").alias("eager ms/call"), pl.col("time_ms").alias("build ms/call"),
        pl.struct("speedup", "speedup_low", "speedup_high").map_elements(
            lambda r: verdicts.ratio_text(r["speedup"], r["speedup_low"], r["speedup_high"]),
            return_dtype=pl.String).alias("speedup [95% CI]"),
        pl.col("breakeven_calls").alias("break-even calls"),
        pl.format("[{}–{}]", pl.col("breakeven_calls_low").round(0).cast(pl.Int64),
                  pl.col("breakeven_calls_high").round(0).cast(pl.Int64)).alias("range"),
        "message").sort("experiment", "implementation", "case")


BREAKEVEN_FORMATS = {"build_s": "{:.2f}", "eager ms/call": "{:.3f}", "build ms/call": "{:.3f}",
                     "break-even calls": "{:,.0f}"}


def breakeven_finding(breakeven: pl.DataFrame) -> str:
    if breakeven.is_empty():
        return "Not measured here: no build with a recorded build time was timed beside eager."
    paid = breakeven.filter(pl.col("breakeven_calls").is_not_null())
    parts = [f"{r['implementation']} ({r['experiment']}, {r['case']}): {r['breakeven_calls']:,.0f} calls"
             for r in paid.sort("breakeven_calls").head(3).iter_rows(named=True)]
    slower = breakeven.filter(pl.col("breakeven_calls").is_null() & (pl.col("speedup_high") < 1)).height
    undecided = breakeven.height - paid.height - slower
    text = (f"{paid.height} of {breakeven.height} builds are measurably faster than eager and pay for their build "
            f"after a finite number of calls")
    text += f"; the soonest: {'; '.join(parts)}" if parts else ""
    text += f". {slower} are measurably slower than eager and never pay for it" if slower else ""
    text += (f". {undecided} show no measurable difference from eager at this precision (the speedup's interval "
             "reaches 1): they may never pay for it" if undecided else "")
    return text + "."


# ------------------------------------------------------------------------------------------ oracle curve
def oracle_curve_figure(curve: pl.DataFrame) -> alt.TopLevelMixin | None:
    """Fig. 5.9: cumulative time along the blocks for eager, compiled, the best-of-two-runs oracle and the dynamic
    programme's choice, per model and setting (the layer timers' method where measured)."""
    if curve.is_empty():
        return None
    methods = curve["method"].unique().to_list()
    data = curve.filter(pl.col("method") == ("timer" if "timer" in methods else methods[0]))
    long = data.unpivot(index=["model", "pair", "mode", "batch_size", "numerics", "memory_format", "block",
                               "block_name"],
                        on=["eager_cum_ms", "compiled_cum_ms", "oracle_cum_ms", "dp_cum_ms"],
                        variable_name="line", value_name="cumulative_ms").with_columns(
        pl.col("line").str.replace("_cum_ms", ""),
        pl.format("{} · {} · batch {} · {} · {}", "pair", "mode", "batch_size", "numerics", "memory_format")
        .alias("setting")).drop_nulls("cumulative_ms")
    lines = alt.Chart().mark_line(point=True).encode(
        x=alt.X("block:O"), y=alt.Y("cumulative_ms:Q", title="cumulative time up to the block (ms)"),
        color=alt.Color("line:N", sort=["eager", "compiled", "oracle", "dp"]),
        strokeDash=alt.condition("datum.line == 'oracle' || datum.line == 'dp'", alt.value([4, 2]), alt.value([1, 0])),
        tooltip=["block_name", "line", "cumulative_ms"])
    return (alt.layer(lines, data=long).properties(width=300, height=160)
            .facet(row=alt.Row("model:N", title=None), column=alt.Column("setting:N", title=None))
            .resolve_scale(y="independent"))


# -------------------------------------------------------------------------------------------- predictor
def predictor_figure(rows: pl.DataFrame) -> alt.TopLevelMixin | None:
    """Fig. 5.4's MLP: held-out predicted against measured speedup, the diagonal and its ±5% band."""
    if rows.is_empty():
        return None
    reach = [float(min(rows["measured_speedup"].min(), rows["predicted_speedup"].min()) * 0.95),
             float(max(rows["measured_speedup"].max(), rows["predicted_speedup"].max()) * 1.05)]
    diagonal = pl.DataFrame({"measured_speedup": reach, "low": [r * 0.95 for r in reach],
                             "high": [r * 1.05 for r in reach]})
    scale = alt.Scale(domain=reach, zero=False)
    band = alt.Chart(diagonal).mark_area(opacity=0.15, color="gray").encode(
        x=alt.X("measured_speedup:Q", scale=scale), y=alt.Y("low:Q", scale=scale), y2="high:Q")
    points = alt.Chart(rows).mark_point(filled=True, size=60).encode(
        x=alt.X("measured_speedup:Q", scale=scale, title="measured speedup"),
        y=alt.Y("predicted_speedup:Q", scale=scale, title="predicted speedup (held out)"),
        color=alt.Color("within_5pct:N", title="within 5%"), shape="target:N",
        tooltip=["conv_id", "pair", "mode", "target", "measured_speedup", "predicted_speedup", "baseline_speedup",
                 "relative_error"])
    return alt.layer(band, points).properties(width=300, height=300)


def predictor_display(summary: pl.DataFrame) -> pl.DataFrame:
    if summary.is_empty():
        return summary
    return summary.select("pair", "mode", "target", "status", "convolutions",
                          pl.col("within_5pct").alias("held out within 5%"),
                          pl.col("baseline_within_5pct").alias("the others' mean within 5%"),
                          pl.col("median_relative_error").alias("median |error|"),
                          pl.col("study_within_5pct").alias("study: within 5%"), "message")


PREDICTOR_FORMATS = {"held out within 5%": "{:.0%}", "the others' mean within 5%": "{:.0%}",
                     "median |error|": "{:.1%}", "study: within 5%": "{:.0%}"}


def predictor_finding(summary: pl.DataFrame) -> str:
    """The study's 95% within 5% against the held-out score here, and whether the MLP beats the mean."""
    ok = summary.filter(pl.col("status") == "ok")
    if ok.is_empty():
        return "Not measured here: too few convolutions with a speedup to train and hold one out."
    parts = []
    for r in ok.iter_rows(named=True):
        reached = "reaches" if r["within_5pct"] >= r["study_within_5pct"] else "falls short of"
        beats = ("better than" if r["within_5pct"] > r["baseline_within_5pct"] else "no better than")
        parts.append(f"{r['target']} speedups ({r['pair']}, {r['mode']}, {r['convolutions']} convolutions): "
                     f"{r['within_5pct']:.0%} of held-out predictions within 5%, which {reached} the study's "
                     f"{r['study_within_5pct']:.0%}, and is {beats} predicting the other convolutions' mean "
                     f"({r['baseline_within_5pct']:.0%})")
    return "; ".join(parts) + "."
