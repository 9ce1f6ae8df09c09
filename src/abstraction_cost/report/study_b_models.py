"""Study B vision models in the report: counterparts of Goldfarb's Fig. 5.6, 5.7, 5.8, 5.10, 5.11, Table 5.1
and predicted against realised selective compilation. Every number drawn comes from a summary table computed by
rule vision_summaries or vision_oracles; these functions only select, rename and draw.
"""
from __future__ import annotations

import altair as alt
import polars as pl

from . import page, verdicts

PAIR_LABEL = {"cpu": "CPU (interp → cpp)", "gpu": "GPU (cuda → triton)"}


SETTING = ("batch_size", "numerics", "memory_format")


def labelled(df: pl.DataFrame) -> pl.DataFrame:
    """`pair` extended by the row's setting (batch, numerics, memory format), so that every facet, table row and
    tooltip keyed by pair tells the settings of one job apart."""
    if df.is_empty() or not all(c in df.columns for c in SETTING):
        return df
    parts = [pl.col(c).cast(pl.String).fill_null("?") for c in SETTING]
    return df.with_columns(pl.format("{} · batch {} · {} · {}", "pair", *parts).alias("pair"))


def study_setting(df: pl.DataFrame) -> pl.DataFrame:
    """The rows of the study's setting: the smallest batch, in fp32 (where measured), contiguous (where measured)."""
    if df.is_empty() or not all(c in df.columns for c in SETTING):
        return df
    df = df.filter(pl.col("batch_size") == pl.col("batch_size").min())
    for column, value in (("numerics", "fp32"), ("memory_format", "contiguous")):
        if value in df[column].to_list():
            df = df.filter(pl.col(column) == value)
    return df


def _speedup_axis(title: str = "speedup (eager / variant)") -> alt.Y:
    return alt.Y("speedup:Q", title=title, scale=alt.Scale(type="log", zero=False))


def _rule_at_one() -> alt.Chart:
    return alt.Chart().mark_rule(color="red", strokeDash=[4, 3]).encode(y=alt.datum(1.0))


def e2e_figure(speedups: pl.DataFrame) -> alt.TopLevelMixin | None:
    """Fig. 5.6: speedup over eager per model and variant (bars: bootstrap intervals; black ticks: the study)."""
    ok = labelled(speedups.filter(pl.col("status") == "ok"))
    if ok.is_empty():
        return None
    data = ok.with_columns(pl.format("{} / {}", "pair", "mode").alias("run"),
                           pl.when(pl.col("speedup_includes_one")).then(pl.lit("interval includes 1"))
                           .otherwise(pl.lit("clear")).alias("verdict"))
    base = alt.Chart().encode(x=alt.X("variant:N", title=None), color=alt.Color("variant:N"))
    points = base.mark_point(filled=True, size=60).encode(
        y=_speedup_axis(), shape=alt.Shape("verdict:N", title=None),
        tooltip=["model", "pair", "mode", "variant", "eager_ms", "time_ms", "speedup", "speedup_low",
                 "speedup_high", "samples"])
    bars = base.mark_rule().encode(y="speedup_low:Q", y2="speedup_high:Q")
    study = alt.Chart().transform_filter("isValid(datum.study_speedup)").mark_tick(
        color="black", thickness=2, size=18).encode(x="variant:N", y="study_speedup:Q",
                                                    tooltip=["model", "study_speedup"])
    return (alt.layer(bars, points, study, _rule_at_one(), data=data).properties(width=150, height=180)
            .facet(column=alt.Column("model:N", title=None),
                   row=alt.Row("run:N", title=None, header=page.row_labels())))


def e2e_display(speedups: pl.DataFrame, builds: pl.DataFrame) -> pl.DataFrame:
    """vision_speedups beside what building each variant cost (vision_builds of the e2e jobs)."""
    keys = ["model", "pair", "mode", "batch_size", "resolution", "numerics", "memory_format", "variant"]
    built = builds.filter(pl.col("step") == "e2e").select(*keys, "first_call_ms", "graphs", "graph_breaks",
                                                          "recompiles", "cache_hits", "cache_misses",
                                                          "alloc_peak_mib", "mem_used_mib_max")
    return (labelled(speedups.join(built, on=keys, how="left"))
            .select("model", "pair", "mode", "variant", pl.col("eager_ms").alias("eager ms"),
                    pl.col("time_ms").alias("variant ms"),
                    pl.format("{} [{}–{}]", pl.col("speedup").round(3), pl.col("speedup_low").round(3),
                              pl.col("speedup_high").round(3)).alias("speedup [95% CI]"),
                    pl.col("speedup_includes_one").alias("CI includes 1"), "invocations",
                    pl.col("study_speedup").alias("study"),
                    pl.col("eager_device_busy").alias("eager GPU busy"),
                    pl.col("device_busy").alias("variant GPU busy"),
                    (pl.col("first_call_ms") / 1000).alias("first call (s, compile)"),
                    "graphs", "graph_breaks", "recompiles",
                    pl.format("{}/{}", "cache_hits", "cache_misses").alias("Inductor cache hits/misses"),
                    pl.col("alloc_peak_mib").alias("allocator peak MiB"),
                    pl.col("mem_used_mib_max").alias("NVML MiB"), "status")
            .sort("model", "pair", "mode", "variant"))


def timing_figure(summary: pl.DataFrame) -> alt.TopLevelMixin | None:
    """Fig. 5.7: each timing variant's median (with interval), per configuration, metric and profiler."""
    if summary.is_empty():
        return None
    data = summary.with_columns(pl.format("{}{}", "metric", pl.when(pl.col("profiled")).then(pl.lit(" (profiled)"))
                                          .otherwise(pl.lit(" (unprofiled)"))).alias("measure"),
                                pl.format("{}_{}", "timing", "configuration").alias("run"))
    base = alt.Chart().encode(y=alt.Y("run:N", title=None), color=alt.Color("measure:N", title=None),
                                  yOffset="measure:N")
    bars = base.mark_bar().encode(x=alt.X("time_ms:Q", title="time per call (ms, median)"),
                                  tooltip=["model", "run", "measure", "time_ms", "time_ms_low", "time_ms_high",
                                           "samples"])
    err = base.mark_rule(color="black").encode(x="time_ms_low:Q", x2="time_ms_high:Q")
    return (alt.layer(bars, err, data=data).properties(width=320)
            .facet(row=alt.Row("model:N", title=None), column=alt.Column("pair:N", title=None))
            .resolve_scale(x="independent", y="independent"))


def layer_density_figure(layers: pl.DataFrame) -> alt.TopLevelMixin | None:
    """Fig. 5.8: density of per-layer speedups (eager / compiled) per model; right of the red line: faster
    compiled."""
    data = labelled(layers.filter(pl.col("speedup").is_not_null() & (pl.col("speedup") > 0)))
    if data.is_empty():
        return None
    data = data.with_columns(pl.col("speedup").log(10).alias("log10_speedup"))
    density = alt.Chart().transform_density(
        "log10_speedup", groupby=["model", "pair", "method"], as_=["log10_speedup", "density"]
    ).mark_line().encode(x=alt.X("log10_speedup:Q", title="log10 per-layer speedup"), y="density:Q",
                         color="method:N")
    one = alt.Chart().mark_rule(color="red", strokeDash=[4, 3]).encode(x=alt.datum(0.0))
    return (alt.layer(density, one, data=data).properties(width=180, height=120)
            .facet(column=alt.Column("model:N", title=None),
                   row=alt.Row("pair:N", title=None, header=page.row_labels())))


def subtraction_figure(layers: pl.DataFrame) -> alt.TopLevelMixin | None:
    """Fig. 5.10: per-layer times by layer subtraction, eager and compiled, with the blocks the dynamic
    programme compiles marked (the study's "custom" configuration)."""
    sub = labelled(layers.filter(pl.col("method") == "subtraction"))
    if sub.is_empty():
        return None
    long = pl.concat([
        sub.select("model", "pair", "block", "block_name", pl.lit("eager").alias("state"),
                   pl.col("eager_ms").alias("time_ms"), pl.col("eager_ms_low").alias("low"),
                   pl.col("eager_ms_high").alias("high"), "dp_compiled"),
        sub.select("model", "pair", "block", "block_name", pl.lit("compiled").alias("state"),
                   pl.col("compiled_ms").alias("time_ms"), pl.col("compiled_ms_low").alias("low"),
                   pl.col("compiled_ms_high").alias("high"), "dp_compiled"),
    ])
    x = alt.X("block:O", title="block")
    lines = alt.Chart().mark_line(point=True).encode(
        x=x, y=alt.Y("time_ms:Q", title="time by subtraction (ms)"), color="state:N",
        tooltip=["block_name", "state", "time_ms", "low", "high", "dp_compiled"])
    band = alt.Chart().mark_rule(opacity=0.5).encode(x=x, y="low:Q", y2="high:Q", color="state:N")
    chosen = alt.Chart().transform_filter("datum.dp_compiled && datum.state == 'compiled'").mark_point(
        shape="diamond", size=90, color="green", filled=True).encode(x=x, y="time_ms:Q",
                                                                     tooltip=["block_name"])
    return (alt.layer(band, lines, chosen, data=long).properties(width=420, height=160)
            .facet(row=alt.Row("model:N", title=None), column=alt.Column("pair:N", title=None))
            .resolve_scale(y="independent"))


def configurations_figure(layers: pl.DataFrame, method: str = "timer") -> alt.TopLevelMixin | None:
    """Fig. 5.11: per-layer times of each model in all four configurations (interp, cpp, cuda, triton)."""
    part = study_setting(layers).filter(pl.col("method") == method)
    if part.is_empty():
        return None
    eager_name = {"cpu": "interp", "gpu": "cuda"}
    long = pl.concat([
        part.select("model", "block", "block_name",
                    pl.col("pair").replace_strict(eager_name, default=None).alias("configuration"),
                    pl.col("eager_ms").alias("time_ms"), pl.col("eager_ms_low").alias("low"),
                    pl.col("eager_ms_high").alias("high")),
        part.select("model", "block", "block_name", "configuration", pl.col("compiled_ms").alias("time_ms"),
                    pl.col("compiled_ms_low").alias("low"), pl.col("compiled_ms_high").alias("high")),
    ])
    color = alt.Color("configuration:N", scale=alt.Scale(domain=["interp", "cpp", "cuda", "triton"],
                                                         range=["#2ca02c", "#1f77b4", "#d62728", "black"]))
    y = alt.Y("time_ms:Q", title=f"block time by {method} (ms)", scale=alt.Scale(type="log"))
    lines = alt.Chart().mark_line(point=True).encode(
        x=alt.X("block:O"), y=y, color=color, tooltip=["block_name", "configuration", "time_ms", "low", "high"])
    # each block's 95% interval (positive bounds only: a log axis cannot draw a subtraction's negative bound)
    bars = alt.Chart().transform_filter("datum.low > 0 && datum.high > 0").mark_rule().encode(
        x=alt.X("block:O"), y=alt.Y("low:Q", scale=alt.Scale(type="log")), y2="high:Q", color=color)
    return (alt.layer(bars, lines, data=long).properties(width=420, height=160)
            .facet(row=alt.Row("model:N", title=None)).resolve_scale(y="independent"))


def oracles_display(oracles: pl.DataFrame) -> pl.DataFrame:
    """Table 5.1 and beyond: every oracle's predicted speedup with its interval, beside the study."""
    return (labelled(oracles.filter(pl.col("choice").is_not_null()))
            .select("model", "pair", "oracle", "blocks", "compiled_blocks", "choice",
                    pl.col("reference_ms").alias("eager ms"), pl.col("predicted_ms").alias("predicted ms"),
                    pl.format("{} [{}–{}]", pl.col("predicted_speedup").round(3),
                              pl.col("predicted_speedup_low").round(3),
                              pl.col("predicted_speedup_high").round(3)).alias("predicted speedup [95% CI]"),
                    pl.col("study_speedup").alias("study (Table 5.1)"),
                    pl.col("switch_model_ms").alias("with switch costs ms"),
                    pl.col("dp_matches_exhaustive").alias("DP = exhaustive"))
            .sort("model", "pair", "oracle"))


def selective_figure(summary: pl.DataFrame) -> alt.TopLevelMixin | None:
    """Predicted against realised selective compilation: realised speedups (intervals), predicted (crosses), the
    study's realised and full-compile speedups (black ticks)."""
    ok = labelled(summary.filter(pl.col("status") == "ok"))
    if ok.is_empty():
        return None
    base = alt.Chart().encode(x=alt.X("variant:N", title=None, sort=["compiled", "all_blocks", "btr_blocks",
                                                                        "dp_blocks", "dp_segments"]))
    realised = base.mark_point(filled=True, size=60).encode(
        y=_speedup_axis("speedup over eager"), color="variant:N",
        tooltip=["model", "pair", "variant", "choice", "time_ms", "speedup", "speedup_low", "speedup_high",
                 "predicted_speedup", "study_speedup"])
    interval = base.mark_rule().encode(y="speedup_low:Q", y2="speedup_high:Q", color="variant:N")
    predicted = base.mark_point(shape="cross", size=80, color="gray").encode(y="predicted_speedup:Q")
    study = base.mark_tick(color="black", thickness=2, size=18).encode(y="study_speedup:Q")
    return (alt.layer(interval, realised, predicted, study, _rule_at_one(), data=ok).properties(width=200, height=180)
            .facet(column=alt.Column("model:N", title=None),
                   row=alt.Row("pair:N", title=None, header=page.row_labels())))


def selective_display(summary: pl.DataFrame) -> pl.DataFrame:
    return (labelled(summary).select("model", "pair", "variant", "choice", pl.col("predicted_ms").alias("predicted ms"),
                           pl.col("predicted_speedup").alias("predicted speedup"),
                           pl.col("time_ms").alias("realised ms"),
                           pl.format("{} [{}–{}]", pl.col("speedup").round(3), pl.col("speedup_low").round(3),
                                     pl.col("speedup_high").round(3)).alias("realised speedup [95% CI]"),
                           pl.col("speedup_includes_one").alias("CI includes 1"),
                           pl.format("{} [{}–{}]", pl.col("prediction_error").round(3),
                                     pl.col("prediction_error_low").round(3),
                                     pl.col("prediction_error_high").round(3))
                           .alias("prediction error (realised / predicted ms)"),
                           pl.col("study_speedup").alias("study"), "status")
            .sort("model", "pair", "variant"))


# the study's end-to-end claims beyond its three numbers (Fig. 5.6): AlexNet slower compiled, DenseNet-121 and
# SqueezeNet 1.1 "marginal"
STUDY_SLOWER = ("alexnet",)
STUDY_MARGINAL = ("densenet121", "squeezenet1_1")
# "marginal" as a speedup within [1/1.15, 1.15]: far below the study's smallest significant one (GoogLeNet, 1.43×)
MARGINAL = 1.15


def e2e_finding(speedups: pl.DataFrame) -> str:
    """The study's end-to-end claim per model, from the compiled variant's paired speedup in each job setting: a
    model the study found faster compiled (it gives 1.61×, 1.43×, 1.63×) or slower (AlexNet) holds where the interval
    lies on that side of 1, does not hold where it lies on the other, and is no measurable difference where it holds
    1; the study's number is said to lie inside the interval or not. A model the study found marginal (DenseNet-121,
    SqueezeNet 1.1) holds where the interval lies inside [1/MARGINAL, MARGINAL], does not hold where it lies wholly
    above or below, and cannot be told where it straddles an edge."""
    rows = speedups.filter(pl.col("variant") == "compiled", pl.col("status") == "ok", pl.col("speedup") > 0,
                           pl.col("study_speedup").is_not_null()
                           | pl.col("model").is_in(STUDY_SLOWER + STUDY_MARGINAL))
    band = f"within {MARGINAL:.2f}× either way"
    if rows.is_empty():
        return ("The study's end-to-end speedups (ResNet-50, GoogLeNet, MobileNetV2 faster compiled, DenseNet-121 and "
                "SqueezeNet 1.1 marginal, AlexNet slower): not measured here (none of those models ran).")
    parts = []
    for r in labelled(rows).sort("model", "pair", "mode").iter_rows(named=True):
        study, low, high = r["study_speedup"], r["speedup_low"], r["speedup_high"]
        if r["model"] in STUDY_MARGINAL:
            theirs, said = f"marginal, {band}", verdicts.within_band(low, high, MARGINAL)
        else:
            side = verdicts.direction(low, high)
            claimed = -1 if r["model"] in STUDY_SLOWER else 1
            said = (verdicts.NO_DIFFERENCE if side == 0 else verdicts.HOLDS if side == claimed
                    else verdicts.DOES_NOT_HOLD)
            inside = low is not None and high is not None and study is not None and low <= study <= high
            theirs = "slower" if study is None else f"{study:.2f}×, {'inside' if inside else 'outside'} this interval"
        parts.append(f"{r['model']} ({r['pair']}, {r['mode']}): {verdicts.ratio_text(r['speedup'], low, high)} "
                     f"(the study: {theirs}): {said}")
    return (f"The study's end-to-end finding, compiled faster than eager (AlexNet slower; DenseNet-121 and SqueezeNet "
            f"1.1 marginal, {band}), per model and job setting (eager / compiled, paired by turn): "
            + "; ".join(parts) + ".")


def drift_finding(speedups: pl.DataFrame) -> str:
    """One sentence per job setting on eager drift: eager timed in the compiled variant's process (after its
    compiled code loaded) over eager in a process with none, in the same turns. A slowdown is claimed only where
    the paired interval excludes 1."""
    rows = speedups.filter(pl.col("variant") == "eager_in_process", pl.col("status") == "ok",
                           pl.col("speedup") > 0)
    if rows.is_empty():
        return "Eager drift: not measured (no end-to-end rows with eager in a compiled process)."
    parts = []
    for r in labelled(rows).sort("model", "pair", "mode").iter_rows(named=True):
        # the row's speedup is clean / in-process; the drift is its inverse, with the interval's ends swapped
        low, high = (1 / r["speedup_high"] if r["speedup_high"] else None,
                     1 / r["speedup_low"] if r["speedup_low"] else None)
        ratio = 1 / r["speedup"]
        side = verdicts.direction(low, high)
        said = ("slower" if side > 0 else "faster") if side else verdicts.NO_DIFFERENCE
        parts.append(f"{r['model']} ({r['pair']}, {r['mode']}): {verdicts.ratio_text(ratio, low, high)}, {said}")
    return ("Eager drift, eager in a process that has loaded compiled code over eager in one that has not "
            "(paired by turn): " + "; ".join(parts) + ".")


def eager_baselines_display(baselines: pl.DataFrame) -> pl.DataFrame:
    """Every step's eager time of one job beside the end-to-end step's: one baseline where the ratio's interval
    holds 1."""
    if baselines.is_empty():
        return baselines
    return (labelled(baselines.with_columns(pl.lit(None, pl.String).alias("mode")))
            .select("model", "pair", "step", "process", pl.col("time_ms").alias("eager ms"),
                    pl.format("[{}–{}]", pl.col("time_ms_low").round(3), pl.col("time_ms_high").round(3))
                    .alias("95% CI"),
                    pl.format("{} [{}–{}]", pl.col("ratio_to_e2e").round(3), pl.col("ratio_to_e2e_low").round(3),
                              pl.col("ratio_to_e2e_high").round(3)).alias("÷ e2e eager [95% CI]"), "invocations",
                    "samples")
            .sort("model", "pair", "step"))


FORMATS = {c: "{:.3f}" for c in ("eager GPU busy", "variant GPU busy", "eager ms", "variant ms", "predicted ms", "realised ms", "with switch costs ms",
                                 "predicted speedup", "first call (s, compile)", "allocator peak MiB", "NVML MiB")}
