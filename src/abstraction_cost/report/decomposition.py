"""Figures, tables and finding sentences of where each level's time goes (table decomposition) and the roofline
(table roofline). These functions select, rename and draw; the numbers come from derived/decomposition.py and
derived/roofline.py."""
from __future__ import annotations

import altair as alt
import polars as pl

from .. import implementations
from ..derived import decomposition as dec
from ..derived import roofline as rf
from ..tables.study_a_sweep import STUDY_TRANSFER
from . import page, verdicts

ORDER = ["transfer", "python", "dispatch", "launch", "device work", "other", "not profiled"]
COMPONENTS = ("transfer_ms", "python_ms", "dispatch_ms", "launch_ms", "device_ms", "other_ms")
HOST_LEVELS = ("python_ms", "dispatch_ms", "launch_ms")


def experiment(d: pl.DataFrame, name: str) -> pl.DataFrame:
    """The decomposition's rows of one experiment (sweep | backend_comparison)."""
    return d.filter(pl.col("experiment") == name)


def cells_transfer(d: pl.DataFrame) -> str | None:
    """The one transfer mode whose cells the sweep's table, figure and sentence show: the study's where measured,
    else the first measured."""
    measured = sorted(experiment(d, "sweep")["transfer"].drop_nulls().unique().to_list())
    return STUDY_TRANSFER if STUDY_TRANSFER in measured else (measured or [None])[0]


def extreme_cells(d: pl.DataFrame) -> pl.DataFrame:
    """The sweep's rows of the smallest and the largest cell (batch × resolution²) of cells_transfer per numerics,
    with `size` smallest | largest."""
    sweep, transfer = experiment(d, "sweep"), cells_transfer(d)
    rows = sweep.filter(pl.col("transfer") == transfer) if transfer else sweep.clear()
    if rows.is_empty():
        return rows.with_columns(size=pl.lit(None, pl.String))
    rows = rows.with_columns(pixels=pl.col("batch_size") * pl.col("resolution") ** 2)
    small = rows.group_by("numerics").agg(pl.col("pixels").min().alias("low"), pl.col("pixels").max().alias("high"))
    rows = rows.join(small, on="numerics")
    return (rows.filter((pl.col("pixels") == pl.col("low")) | (pl.col("pixels") == pl.col("high")))
            .with_columns(size=pl.when(pl.col("pixels") == pl.col("low")).then(pl.lit("smallest"))
                          .otherwise(pl.lit("largest")))
            .drop("pixels", "low", "high"))


def stacked_figure(d: pl.DataFrame) -> alt.TopLevelMixin | None:
    """Per implementation at the smallest and largest cells: the timed call split into transfer, the levels it
    carries, device work and the rest (other; below zero where host and device work overlap); without device work,
    the rest of the call is 'not profiled'."""
    cells = extreme_cells(d)
    if cells.is_empty():
        return None
    long = pl.concat([dec.stacked(cells.drop("size")), not_profiled(cells)], how="diagonal_relaxed").join(
        cells.select("numerics", "cell", "size").unique(), on=["numerics", "cell"])
    long = long.with_columns(pl.format("{} · batch {} · {} px · {}", "size", "batch_size", "resolution", "numerics")
                             .alias("cell_label"))
    bars = alt.Chart().mark_bar().encode(
        y=alt.Y("implementation:N", title=None), x=alt.X("sum(ms):Q", title="ms per call (stacked)"),
        color=alt.Color("component:N", sort=ORDER, scale=alt.Scale(domain=ORDER)),
        order=alt.Order("order:Q"), tooltip=["implementation", "component", "ms", "batch_size", "resolution"])
    data = long.with_columns(order=pl.col("component").replace_strict({c: i for i, c in enumerate(ORDER)},
                                                                    return_dtype=pl.Int64))
    return (alt.layer(bars, data=data).properties(width=420)
            .facet(row=alt.Row("cell_label:N", title=None, header=page.row_labels(), sort="descending"))
            .resolve_scale(x="independent"))   # "smallest · ..." above "largest · ..."


def not_profiled(cells: pl.DataFrame) -> pl.DataFrame:
    """Per row without device work: the call less its known parts, as component 'not profiled', so that its bar
    is as long as its call (cudnn's without a CUPTI profiler would otherwise draw as its transfer and launch)."""
    known = pl.sum_horizontal(*(pl.col(c).fill_null(0.0) for c in COMPONENTS))
    return (cells.filter(pl.col("device_ms").is_null())
            .select("numerics", "cell", "batch_size", "resolution", "transfer", "implementation",
                    ms=pl.col("time_ms") - known, component=pl.lit("not profiled")))


def display(d: pl.DataFrame) -> pl.DataFrame:
    cells = extreme_cells(d)
    if cells.is_empty():
        return cells
    return display_columns(cells)


def caption(d: pl.DataFrame) -> str:
    """The sweep table's caption, naming the transfer mode its cells were measured with."""
    transfer = cells_transfer(d)
    mode = f", {transfer} input" + (" (the study's)" if transfer == STUDY_TRANSFER else "") if transfer else ""
    return f"Per level, smallest and largest cells{mode} (results/derived/decomposition.parquet)"


def display_columns(cells: pl.DataFrame) -> pl.DataFrame:
    return cells.select("numerics", "size", "batch_size", "resolution", "implementation", "status",
                        pl.col("time_ms").alias("call ms"), pl.col("transfer_ms").alias("transfer"),
                        pl.col("python_ms").alias("python"), pl.col("dispatch_ms").alias("dispatch"),
                        pl.col("launch_ms").alias("launch"), pl.col("device_ms").alias("device work"),
                        pl.col("other_ms").alias("other"), pl.col("fusion_ms").alias("fusion saved"),
                        pl.col("host_issue_ms").alias("host issue"), "kernels", pl.col("launch_calls").alias("launches"),
                        pl.col("device_idle_ms").alias("device idle"), "bound", "message"
                        ).sort("numerics", "size", "implementation", descending=[False, True, False])


FORMATS = {c: "{:.3f}" for c in ("call ms", "transfer", "python", "dispatch", "launch", "device work", "other",
                                 "fusion saved", "host issue", "device idle")} | {"kernels": "{:.0f}",
                                                                                  "launches": "{:.0f}"}


def bound_words(bound: str | None) -> str:
    """'host-bound: its host issues longer than the device works' | 'device-bound' | 'bound not measured'."""
    if bound == "host":
        return "host-bound: its host takes longer to issue the call than the device to run it"
    return "device-bound" if bound == "device" else "bound not measured"


def central_verdict(d: pl.DataFrame, speedups: pl.DataFrame) -> tuple[str, str]:
    """(verdict, sentence) on the study's central claim in the levels' terms: eager is far slower than the other
    implementations where the host bounds it, because of its host levels (python, dispatch, launch), and the gap
    narrows as the cell grows because device work takes over. Holds where, at the smallest cell, eager's host levels
    make up most of its gap to cudnn-graphs and that gap is measurable (sweep_speedups' interval above 1), and at
    the largest cell they are a smaller share of eager's call; does not hold where either part contradicts it; no
    measurable difference where the gap's interval holds 1 or a level is missing."""
    d = experiment(d, "sweep")
    cells = extreme_cells(d).filter(pl.col("implementation") == "eager")
    verdict_parts, words = [], []
    for numerics in sorted(cells["numerics"].unique().to_list()) if cells.height else []:
        mine = {r["size"]: r for r in cells.filter(pl.col("numerics") == numerics).iter_rows(named=True)}
        small, large = mine.get("smallest"), mine.get("largest")
        graphs = d.filter(pl.col("numerics") == numerics, pl.col("implementation") == "cudnn-graphs")
        if small is None or large is None or graphs.is_empty() or any(
                r[c] is None for r in (small, large) for c in HOST_LEVELS):
            verdict_parts.append(verdicts.NO_DIFFERENCE)
            words.append(f"{numerics}: a level is missing at the smallest or largest cell (see the table)")
            continue
        floor = graphs.filter(pl.col("cell") == small["cell"])["time_ms"]
        gap = small["time_ms"] - (floor[0] if floor.len() else small["time_ms"])
        host_small = sum(small[c] for c in HOST_LEVELS)
        share_small, share_large = host_small / small["time_ms"], sum(large[c] for c in HOST_LEVELS) / large["time_ms"]
        measured = speedups.filter(pl.col("numerics") == numerics, pl.col("implementation") == "cudnn-graphs",
                                   pl.col("cell") == small["cell"]) if speedups.height else speedups
        side = verdicts.direction(*(measured.row(0, named=True)[k] for k in ("speedup_low", "speedup_high"))) \
            if measured.height else (1 if gap > 0 else 0)
        if side == 0:
            part = verdicts.NO_DIFFERENCE
        elif side < 0 or gap <= 0 or host_small < gap / 2 or share_large >= share_small:
            part = verdicts.DOES_NOT_HOLD
        else:
            part = verdicts.HOLDS
        verdict_parts.append(part)
        words.append(
            f"{numerics}, {small['transfer']}: at batch {small['batch_size']}, {small['resolution']} px eager takes "
            f"{small['time_ms']:.2f} ms, {gap:.2f} ms more than cudnn-graphs; its python, dispatch and launch levels "
            f"account for {host_small:.2f} ms ({small['python_ms']:.2f} + {small['dispatch_ms']:.2f} + "
            f"{small['launch_ms']:.2f}), {share_small:.0%} of its call"
            + (f", device work {small['device_ms']:.2f} ms" if small["device_ms"] is not None else "")
            + f" ({bound_words(small['bound'])}); at batch {large['batch_size']}, {large['resolution']} px "
            f"they are {share_large:.0%} of its {large['time_ms']:.2f} ms"
            + (f" (device work {large['device_ms']:.2f} ms)" if large["device_ms"] is not None else ""))
    if not verdict_parts:
        return verdicts.NO_DIFFERENCE, "Not measured here: no eager row at the smallest and largest cells."
    verdict = verdicts.combine(verdict_parts)
    return verdict, (f"The study's central claim in the levels' terms (eager's gap is its host levels, which matter "
                     f"less as the cell grows) {verdict}: " + "; ".join(words) + ".")


def backend_display(d: pl.DataFrame) -> pl.DataFrame:
    """The backend comparison's cell, every numerics and implementation, in display()'s columns."""
    rows = experiment(d, "backend_comparison")
    if rows.is_empty():
        return rows
    return display_columns(rows.with_columns(size=pl.lit("comparison"))).drop("size").sort("numerics",
                                                                                            "implementation")


def backend_finding(d: pl.DataFrame) -> str:
    """One sentence per numerics on the backend comparison's cell: each implementation's call beside its device
    work and its host levels (python + dispatch + launch), from the rows backend_display shows."""
    rows = experiment(d, "backend_comparison")
    if rows.is_empty():
        return "The backend comparison's cell was not decomposed (no ok backend_comparison rows)."
    parts = []
    for numerics in sorted(rows["numerics"].unique().to_list()):
        mine = rows.filter(pl.col("numerics") == numerics).sort("time_ms")
        first = mine.row(0, named=True)
        words = []
        for r in mine.iter_rows(named=True):
            host = [r[c] for c in HOST_LEVELS]
            words.append(f"{r['implementation']} {r['time_ms']:.2f} ms"
                         + (f" (host levels {sum(host):.2f}" if all(v is not None for v in host) else " (host levels "
                            "not separated")
                         + (f", device work {r['device_ms']:.2f})" if r["device_ms"] is not None
                            else ", device work not profiled)"))
        parts.append(f"{numerics} at batch {first['batch_size']}, {first['resolution']} px: " + ", ".join(words))
    return "The backend comparison's cell, per call: " + "; ".join(parts) + "." + why_no_device_work(rows)


def why_no_device_work(rows: pl.DataFrame) -> str:
    """' No device work for cudnn, cudnn-graphs: <message>.' per distinct message of the rows without device work,
    or '' where every row has its device work."""
    who: dict[str, list[str]] = {}
    for r in rows.filter(pl.col("device_ms").is_null()).iter_rows(named=True):
        names = who.setdefault(r["message"] or "no reason recorded", [])
        names += [] if r["implementation"] in names else [r["implementation"]]
    return "".join(f" No device work for {', '.join(implementations.order(names))}: {message}."
                   for message, names in who.items())


# ---------------------------------------------------------------------------------- Study B end to end
VISION_ORDER = ["host (python + dispatch + launch)", "device work", "other"]


def _vision(d: pl.DataFrame) -> pl.DataFrame:
    """The decomposition's vision_e2e rows with `run` (model's pair and setting) and `variant` (mode added where
    the variant has one)."""
    rows = experiment(d, "vision_e2e")
    parts = [pl.col(c).cast(pl.String).fill_null("?") for c in ("batch_size", "numerics", "memory_format")]
    return rows.with_columns(pl.format("{} · batch {} · {} · {}", "pair", *parts).alias("run"),
                             pl.when(pl.col("mode").is_null()).then(pl.col("implementation"))
                             .otherwise(pl.format("{} ({})", "implementation", "mode")).alias("variant"))


def vision_figure(d: pl.DataFrame) -> alt.TopLevelMixin | None:
    """Study B, per model, pair and setting: each end-to-end variant's call split into its host levels (python,
    dispatch and launch together: the device's idle time), device work and the rest (other)."""
    rows = _vision(d)
    if rows.is_empty():
        return None
    long = dec.vision_stacked(rows, extra=("run", "variant"))
    if long.is_empty():
        return None
    long = long.with_columns(order=pl.col("component").replace_strict({c: i for i, c in enumerate(VISION_ORDER)},
                                                                      return_dtype=pl.Int64))
    bars = alt.Chart().mark_bar().encode(
        y=alt.Y("variant:N", title=None), x=alt.X("sum(ms):Q", title="ms per call (stacked)"),
        color=alt.Color("component:N", sort=VISION_ORDER, scale=alt.Scale(domain=VISION_ORDER)),
        order=alt.Order("order:Q"), tooltip=["model", "run", "variant", "component", "ms"])
    return (alt.layer(bars, data=long).properties(width=300)
            .facet(row=alt.Row("run:N", title=None, header=page.row_labels()), column=alt.Column("model:N", title=None))
            .resolve_scale(x="independent"))


def vision_display(d: pl.DataFrame) -> pl.DataFrame:
    rows = _vision(d)
    if rows.is_empty():
        return rows
    return rows.select("model", "run", "variant", "status", pl.col("time_ms").alias("call ms"),
                       pl.col("host_ms").alias("host"), pl.col("device_ms").alias("device work"),
                       pl.col("other_ms").alias("other"), pl.col("fusion_ms").alias("fusion saved"),
                       pl.col("launch_saved_ms").alias("launch saved"), pl.col("host_issue_ms").alias("host issue"),
                       "kernels", pl.col("launch_calls").alias("launches"),
                       pl.col("device_idle_ms").alias("device idle"), "bound", "message"
                       ).sort("model", "run", "variant")


VISION_FORMATS = {**FORMATS, "host": "{:.3f}", "launch saved": "{:.3f}"}


def vision_finding(d: pl.DataFrame) -> str:
    """One clause per model, pair and setting, from the rows vision_display shows: eager's host levels and device
    work, what compiling saved in kernel time (fusion) and in the rest, what the CUDA graph saved and its launches
    against eager's; and, where there is no device time, why."""
    rows = _vision(d)
    if rows.is_empty():
        return "Study B's end-to-end variants were not decomposed (no ok vision_e2e rows)."
    parts = []
    for (model, run), group in rows.sort("model", "run").group_by(["model", "run"], maintain_order=True):
        by = {r["variant"]: r for r in group.iter_rows(named=True)}
        eager = by.get("eager")
        if eager is None or eager["host_ms"] is None:
            continue
        words = [f"eager {eager['time_ms']:.2f} ms, of which host levels {eager['host_ms']:.2f} "
                 f"({eager['host_ms'] / eager['time_ms']:.0%}) and device work {eager['device_ms']:.2f}"
                 + (f" over {eager['kernels']:.0f} kernels" if eager["kernels"] is not None else "")]
        for r in group.filter(pl.col("implementation") == "compiled").iter_rows(named=True):
            if r["fusion_ms"] is not None and r["host_ms"] is not None:
                words.append(f"{r['variant']} {r['time_ms']:.2f} ms: fusion saved {r['fusion_ms']:.2f} ms of "
                             f"kernel time, host levels {r['host_ms']:.2f}")
        graphs = by.get("eager_cuda_graphs")
        if graphs is not None and graphs["launch_saved_ms"] is not None:
            words.append(f"one CUDA graph of eager saved {graphs['launch_saved_ms']:.2f} ms"
                         + (f" with {graphs['launch_calls']:.0f} launch calls against eager's "
                            f"{eager['launch_calls']:.0f}" if graphs["launch_calls"] is not None
                            and eager["launch_calls"] is not None else ""))
        parts.append(f"{model} ({run}): " + "; ".join(words))
    missing = rows.filter(pl.col("device_ms").is_null())
    # a message joins its reasons with "; ": each reason once, in the order first met
    reasons = list(dict.fromkeys(reason for message in missing["message"].drop_nulls().sort()
                                 for reason in message.split("; ")))
    text = ("Study B end to end, per call: " + "; ".join(parts) + "." if parts else
            "No Study B variant has its host levels and device work separated.")
    if missing.height:
        text += (f" No device work for {missing.height} of {rows.height} variants, because: "
                 + "; ".join(reasons) + ".")
    return text


# ---------------------------------------------------------------------------------------------- roofline
def roofline_figure(r: pl.DataFrame, study: str) -> alt.TopLevelMixin | None:
    """Achieved TFLOP/s per implementation (Study A: per cell; Study B: per model and variant), with the run's
    matmul peak as a rule."""
    rows = r.filter(pl.col("study") == study, pl.col("achieved_tflops").is_not_null())
    if rows.is_empty():
        return None
    rows = rows.with_columns(pl.format("batch {} · {} px", "batch_size", "resolution").alias("input"))
    # Study A's inputs in order of work (batch × resolution²), not alphabetically
    inputs = rows.sort(pl.col("batch_size") * pl.col("resolution") ** 2)["input"].unique(maintain_order=True)
    x = alt.X("input:N", title=None, sort=inputs.to_list()) if study == "study_a" else alt.X("model:N", title=None)
    points = alt.Chart().mark_point(filled=True, size=60).encode(
        x=x, y=alt.Y("achieved_tflops:Q", title="achieved TFLOP/s (timed call)"),
        color="implementation:N", shape="numerics:N",
        tooltip=["implementation", "model", "numerics", "batch_size", "resolution", "transfer", "time_ms",
                 "achieved_tflops", "device_tflops", "peak_tflops", "fraction_of_peak"])
    layers = [points]
    if rows["peak_tflops"].drop_nulls().len():
        layers.append(alt.Chart().mark_rule(strokeDash=[4, 2], color="gray").encode(y="max(peak_tflops):Q"))
    return alt.layer(*layers, data=rows).properties(width=420, height=240)


def roofline_finding(r: pl.DataFrame) -> str:
    best = rf.best_fraction(r)
    if best is None:
        reason = r["message"].drop_nulls()
        return ("No fraction of peak: " + (reason[0] if reason.len() else "no roofline rows") + ".")
    return (f"Study A's best path reaches {best['fraction_of_peak']:.0%} of the run's matmul peak "
            f"({best['achieved_tflops']:.1f} of {best['peak_tflops']:.1f} TFLOP/s, {best['peak_of']}): "
            f"{best['implementation']} at batch {best['batch_size']}, {best['resolution']} px, {best['numerics']}"
            + (f", {best['transfer']} input" if best["transfer"] else "")
            + (f"; its kernels alone run at {best['device_tflops']:.1f} TFLOP/s" if best["device_tflops"] else "")
            + ". FLOPs count convolutions and matmuls only (table flops).")


def roofline_display(r: pl.DataFrame) -> pl.DataFrame:
    if r.is_empty():
        return r
    return r.select("study", "model", "implementation", "numerics", "batch_size", "resolution", "transfer", "status",
                    pl.col("achieved_tflops").alias("TFLOP/s"), pl.col("device_tflops").alias("kernels' TFLOP/s"),
                    pl.col("fraction_of_peak").alias("of peak"), "message").sort("study", "model", "implementation")


ROOFLINE_FORMATS = {"TFLOP/s": "{:.2f}", "kernels' TFLOP/s": "{:.2f}", "of peak": "{:.0%}"}
