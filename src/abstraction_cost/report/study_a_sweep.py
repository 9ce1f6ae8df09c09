"""Study A's inference sweep (tables sweep, sweep_h2d, sweep_kernels): the counterparts of the study's Fig. 8-14
(time per sample and memory against resolution at a fixed batch and against batch at a fixed resolution, a line
per implementation, log axes, oom cells marked), a heat map per implementation of its speed against eager, the
H2D and kernel tables beside the study's numbers, and one sentence per figure on whether the study's finding
holds here. Every figure has one row of panels per numerics (study_a.sweep.numerics): speed is against eager in
the same numerics, and the findings read the study's setting (fp32, float32-pageable) where it was measured."""
from __future__ import annotations

import html
import re

import altair as alt
import polars as pl

from .. import implementations
from ..measure.numerics import NUMERICS
from ..study_a.sweep.summary import RELU
from ..tables.study_a_sweep import STUDY_TRANSFER
from . import page, verdicts

STUDY_NUMERICS = "fp32"  # the study's (TF32 did not exist on its GPUs)
# What the charts plot. Memory is the process's own (the allocator peak, exact per cell, which the memory finding
# reads) and, in a chart of its own beside it, NVML's device-wide figure: all the GPU's processes and the CUDA
# context, sampled every measure.nvml_interval_ms, so short cells may have none.
METRICS = {"time_per_sample_ms": "time per sample (ms), median",
           "alloc_peak_mib": "allocator peak (MiB), the process's own",
           "mem_used_mib_max": "device memory used (MiB, NVML, device-wide)",
           "gpu_util_mean_pct": "GPU utilisation (%, NVML, mean over the cell)",
           "energy_per_sample_j": "energy per sample (J, NVML power × time)"}
LINEAR = {"gpu_util_mean_pct"}  # a percentage: its axis is linear, the others log
# cells with no time, on the panel's floor: out of memory, logits not eager's, failed (a crash: its exit status)
FAILED_MARKS = {"oom": "cross", "wrong_output": "triangle-up", "error": "square"}


def _order(names) -> list[str]:
    return implementations.order(names)


def fixed_points(sweep: pl.DataFrame, batch: int = 32, resolution: int = 256) -> tuple[int | None, int | None]:
    """The grid's batch and resolution nearest the study's point (batch 32; resolution 256), for the fixed axes."""
    if sweep.is_empty():
        return None, None
    nearest = lambda values, x: min(values, key=lambda v: (abs(v - x), v))  # noqa: E731
    return nearest(sweep["batch_size"].unique().to_list(), batch), nearest(sweep["resolution"].unique().to_list(),
                                                                          resolution)


def line_chart(sweep: pl.DataFrame, metric: str, along: str, width: int = 260) -> alt.Chart | None:
    """`metric` (METRICS) against `along` (resolution or batch_size) at the other axis's fixed point; one panel per
    (numerics, transfer mode), a line per implementation, with each point's 95% interval where the table has one
    (`<metric>_low`, `<metric>_high`); cells with no time (FAILED_MARKS) on the panel's floor, shaped by status.
    None when nothing was measured."""
    if metric not in METRICS or metric not in sweep.columns:
        raise ValueError(f"line_chart: no metric {metric!r} in the table (charted: {sorted(METRICS)})")
    fixed_column = "batch_size" if along == "resolution" else "resolution"
    batch, resolution = fixed_points(sweep)
    fixed = batch if fixed_column == "batch_size" else resolution
    label = METRICS[metric]
    data = sweep.filter(pl.col(fixed_column) == fixed) if fixed is not None else sweep
    ok = data.filter((pl.col("status") == "ok") & pl.col(metric).is_not_null() & (pl.col(metric) > 0))
    if ok.is_empty():
        return None
    floor = ok[metric].min() * 0.7
    failed = data.filter(pl.col("status").is_in(list(FAILED_MARKS))).with_columns(pl.lit(floor).alias(metric))
    bounds = [f"{metric}_low", f"{metric}_high"]
    has_interval = all(c in data.columns for c in bounds) and ok[bounds[0]].null_count() < ok.height
    columns = ["implementation", "numerics", "transfer", along, metric, *(bounds if has_interval else []),
               "status", "message"]
    order = _order(ok["implementation"])
    x = alt.X(f"{along}:Q", scale=alt.Scale(type="log", base=2), title=along.replace("_", " "),
              axis=page.ticks_at(data[along]))
    y = alt.Y(f"{metric}:Q", scale=alt.Scale(type="linear" if metric in LINEAR else "log"), title=label)
    color = alt.Color("implementation:N", sort=order)
    both = pl.concat([ok.select(columns), failed.select(columns)])
    lines = alt.Chart().mark_line(point=True).encode(x=x, y=y, color=color, tooltip=columns).transform_filter(
        alt.datum.status == "ok")
    marks = alt.Chart().mark_point(size=80, filled=True).encode(
        x=x, y=y, color=color, tooltip=columns,
        shape=alt.Shape("status:N", scale=alt.Scale(domain=list(FAILED_MARKS), range=list(FAILED_MARKS.values())),
                        title="not timed")).transform_filter(alt.datum.status != "ok")
    layers = [lines, marks] if not failed.is_empty() else [lines]
    if has_interval:
        layers.append(alt.Chart().mark_rule().encode(x=x, y=alt.Y(f"{bounds[0]}:Q"), y2=f"{bounds[1]}:Q",
                                                     color=color).transform_filter(
            f"datum.status == 'ok' && isValid(datum['{bounds[0]}'])"))
    title = f"{label} against {along.replace('_', ' ')} at {fixed_column.replace('_', ' ')} {fixed}"
    return alt.layer(*layers, data=both).properties(width=width, height=200).facet(
        column=alt.Column("transfer:N", title=None),
        row=alt.Row("numerics:N", sort=_numerics_order(ok["numerics"]), title=None)).properties(title=title)


SPEED_KEYS = ["numerics", "transfer", "batch_size", "resolution"]


def speed_vs_eager(sweep: pl.DataFrame, paired: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per (numerics, implementation, transfer, cell): eager's median time per sample in the same numerics over
    the implementation's, with its 95% interval. Where the interleaved sweep's table sweep_speedups (`paired`)
    has the cell from paired turns, its speedup and interval are used (interval: "paired"); elsewhere the
    conservative quotient of the two medians' intervals (verdicts.ratio_interval; interval: "quotient"), since
    the two were then measured apart. speedup_includes_one where the interval holds 1 or is missing."""
    ok = sweep.filter((pl.col("status") == "ok") & pl.col("time_per_sample_ms").is_not_null())
    eager = ok.filter(pl.col("implementation") == "eager").select(
        *SPEED_KEYS, pl.col("time_per_sample_ms").alias("eager_ms"),
        pl.col("time_per_sample_ms_low").alias("eager_low"), pl.col("time_per_sample_ms_high").alias("eager_high"))
    both = ok.filter(pl.col("implementation") != "eager").join(eager, on=SPEED_KEYS).with_columns(
        speedup=pl.col("eager_ms") / pl.col("time_per_sample_ms"),
        speedup_low=pl.col("eager_low") / pl.col("time_per_sample_ms_high"),
        speedup_high=pl.col("eager_high") / pl.col("time_per_sample_ms_low"), interval=pl.lit("quotient"))
    if paired is not None and not paired.is_empty():
        turns = paired.filter(pl.col("speedup").is_not_null() & (pl.col("paired_turns") > 0)).select(
            "implementation", *SPEED_KEYS, pl.col("speedup").alias("p"), pl.col("speedup_low").alias("p_low"),
            pl.col("speedup_high").alias("p_high"))
        both = both.join(turns, on=["implementation", *SPEED_KEYS], how="left").with_columns(
            speedup=pl.coalesce("p", "speedup"),
            speedup_low=pl.when(pl.col("p").is_not_null()).then(pl.col("p_low")).otherwise(pl.col("speedup_low")),
            speedup_high=pl.when(pl.col("p").is_not_null()).then(pl.col("p_high")).otherwise(pl.col("speedup_high")),
            interval=pl.when(pl.col("p").is_not_null()).then(pl.lit("paired")).otherwise(pl.col("interval")))
    return both.with_columns(
        speedup_includes_one=(pl.col("speedup_low").is_null() | pl.col("speedup_high").is_null()
                              | ((pl.col("speedup_low") <= 1) & (pl.col("speedup_high") >= 1)))).select(
        "implementation", *SPEED_KEYS, "time_per_sample_ms", "eager_ms", "speedup", "speedup_low", "speedup_high",
        "speedup_includes_one", "interval")


def heat_map(sweep: pl.DataFrame, cell: int = 34, paired: pl.DataFrame | None = None) -> alt.Chart | None:
    """One panel per implementation (columns) and (numerics, transfer) (rows): speed against eager per cell
    (speed_vs_eager: paired where the interleaved sweep measured the cell)."""
    data = speed_vs_eager(sweep, paired)
    if data.is_empty():
        return None
    order = _order(data["implementation"])
    rank = {n: i for i, n in enumerate(_numerics_order(data["numerics"]))}
    data = data.with_columns(setting=pl.concat_str("numerics", pl.lit(", "), "transfer")).sort(
        pl.col("numerics").replace_strict(rank, default=len(rank)), "transfer")
    settings = list(dict.fromkeys(data["setting"]))
    # symmetric about 1 on the log scale: a 2% slowdown is pale red, not the darkest red of a one-sided domain
    reach = max(data["speedup"].max(), 1 / data["speedup"].min(), 1.01)
    base = alt.Chart(data).encode(x=alt.X("batch_size:O", title="batch", axis=alt.Axis(labelAngle=0)),
                                  y=alt.Y("resolution:O", sort="descending", title="resolution"))
    rect = base.mark_rect().encode(
        color=alt.Color("speedup:Q", title="speed vs eager", scale=alt.Scale(type="log", scheme="redblue",
                                                                             domain=[1 / reach, reach]),
                        legend=alt.Legend(format=".2f")),  # a log scale's end labels print 12 digits
        tooltip=data.columns)
    # pale figures: the ratio's interval holds 1 (no measurable difference from eager at this precision)
    text = base.mark_text(fontSize=9).encode(text=alt.Text("speedup:Q", format=".2f"),
                                             opacity=alt.condition("datum.speedup_includes_one", alt.value(0.35),
                                                                   alt.value(1.0)))
    n_b, n_r = data["batch_size"].n_unique(), data["resolution"].n_unique()
    return alt.layer(rect, text).properties(width=cell * n_b, height=cell * n_r).facet(
        column=alt.Column("implementation:N", sort=order, title=None),
        row=alt.Row("setting:N", sort=settings, title=None, header=page.row_labels()))


# --------------------------------------------------------------------------------------------- findings
def _numerics_order(values) -> list[str]:
    rank = {n: i for i, n in enumerate(NUMERICS)}
    return sorted(set(values), key=lambda n: (rank.get(n, len(rank)), n))


def _study_rows(sweep: pl.DataFrame) -> pl.DataFrame:
    """The rows of the study's setting: its transfer mode and numerics where measured, else the first measured."""
    for column, study, order in (("transfer", STUDY_TRANSFER, sorted), ("numerics", STUDY_NUMERICS, _numerics_order)):
        values = sweep[column].drop_nulls().unique().to_list() if not sweep.is_empty() else []
        chosen = study if study in values else (order(values) or [None])[0]
        sweep = sweep.filter(pl.col(column) == chosen) if chosen else sweep
    return sweep


def numerics_finding(sweep: pl.DataFrame) -> str:
    """fp32 (TF32 off, the study's) against tf32 (PyTorch's default): per implementation, the median over the
    cells both measured of the fp32 time per sample over the tf32 one, at the study's transfer mode."""
    ok = sweep.filter((pl.col("status") == "ok") & pl.col("time_per_sample_ms").is_not_null())
    transfers = ok["transfer"].unique().to_list()
    transfer = STUDY_TRANSFER if STUDY_TRANSFER in transfers else min(transfers, default="")
    ok = ok.filter(pl.col("transfer") == transfer)
    keys = ["implementation", "batch_size", "resolution"]
    side = lambda n: ok.filter(pl.col("numerics") == n).select(  # noqa: E731
        *keys, pl.col("time_per_sample_ms").alias(n), pl.col("time_per_sample_ms_low").alias(f"{n}_low"),
        pl.col("time_per_sample_ms_high").alias(f"{n}_high"))
    pairs = side("fp32").join(side("tf32"), on=keys)
    if pairs.is_empty():
        return "Not measured here: no cell was measured in both fp32 and tf32 (study_a.sweep.numerics)."
    # each cell's ratio interval (verdicts.ratio_interval): tf32 measurably faster, slower, or neither
    pairs = pairs.with_columns(ratio=pl.col("fp32") / pl.col("tf32"),
                               side=pl.when(pl.col("fp32_low") / pl.col("tf32_high") > 1).then(1)
                               .when(pl.col("fp32_high") / pl.col("tf32_low") < 1).then(-1).otherwise(0))
    ratios = pairs.group_by("implementation").agg(pl.col("ratio").median(), pl.len().alias("cells"),
                                                  (pl.col("side") == 1).sum().alias("faster"),
                                                  (pl.col("side") == -1).sum().alias("slower"))
    by = {r["implementation"]: r for r in ratios.iter_rows(named=True)}
    parts = [f"{impl} {by[impl]['ratio']:.2f}× ({by[impl]['cells']} cells: tf32 measurably faster in "
             f"{by[impl]['faster']}, slower in {by[impl]['slower']}, no measurable difference at this precision in "
             f"{by[impl]['cells'] - by[impl]['faster'] - by[impl]['slower']})" for impl in _order(by)]
    return (f"TF32 against fp32 (TF32 off, the study's setting), as fp32 time over tf32 time per sample, median over "
            f"the cells measured in both ({transfer}), with each cell's ratio judged by its interval: "
            f"{'; '.join(parts)}.")


ORDER_OF_MAGNITUDE = 5.0  # "almost an order of magnitude": eager at least this many times slower


def time_finding(sweep: pl.DataFrame, paired: pl.DataFrame | None = None) -> str:
    """Study: PyTorch almost an order of magnitude slower than all others, the gap narrowing with batch or
    resolution. Here, from the heat map's ratios (eager / implementation, per sample, the study's setting), two
    claims with a verdict each: at the smallest cell eager is ≥ ORDER_OF_MAGNITUDE× slower than every other
    implementation (verdicts.at_least), and each gap is measurably narrower at the largest cell (the two ratios'
    intervals apart). The study's implementations only (implementations.in_study: not the baselines beyond it)."""
    data = speed_vs_eager(_study_rows(sweep), paired)
    if not data.is_empty():
        data = data.filter(pl.col("implementation").map_elements(implementations.in_study, return_dtype=pl.Boolean))
    if data.is_empty():
        return "Not measured here: no implementation has a cell beside an eager cell."
    parts, slower, narrowing = [], [], []
    how = {"paired": "paired turns of the interleaved sweep", "quotient": "the two medians' intervals"}
    intervals = " and ".join(how[i] for i in sorted(set(data["interval"])))
    for impl in _order(data["implementation"]):
        d = data.filter(pl.col("implementation") == impl).sort("resolution", "batch_size")
        small, large = d.row(0, named=True), d.row(-1, named=True)
        s3 = (small["speedup"], small["speedup_low"], small["speedup_high"])
        l3 = (large["speedup"], large["speedup_low"], large["speedup_high"])
        parts.append(f"{impl} {verdicts.ratio_text(*s3)} at batch {small['batch_size']}, {small['resolution']} px "
                     f"and {verdicts.ratio_text(*l3)} at batch {large['batch_size']}, {large['resolution']} px")
        slower.append(verdicts.at_least(*s3, ORDER_OF_MAGNITUDE))
        if verdicts.direction(*s3[1:]) <= 0:
            narrowing.append(verdicts.NO_DIFFERENCE)   # no measured gap at the smallest cell to narrow
        else:
            gap = verdicts.separated(s3, l3)
            narrowing.append(verdicts.HOLDS if gap > 0 else verdicts.DOES_NOT_HOLD if gap < 0
                             else verdicts.NO_DIFFERENCE)
    return (f"Eager over each implementation, time per sample ({_setting(data)}; a ratio's 95% interval from "
            f"{intervals}): {'; '.join(parts)}. The study's \"almost an order of magnitude slower\" "
            f"(≥ {ORDER_OF_MAGNITUDE:g}× at the smallest cell, its interval above 1, for every implementation): "
            f"{verdicts.combine(slower)}. Its gap narrowing towards the largest cell (the largest cell's interval "
            f"below the smallest's): {verdicts.combine(narrowing)}.")


MEMORY_SAME = 0.10   # LibTorch "about the same" as PyTorch: within ±10% of eager's allocator peak
MEMORY_LOWER = 0.05  # TorchScript and cuDNN "lower": more than 5% below eager's (the allocator peak is exact, so
                     # the margin only keeps a few MiB of bookkeeping from reading as a finding)
MEMORY_REGION = (64, 128)  # the study's "especially below resolution 2^6 and batch 2^7"


def _cell_range(rows: pl.DataFrame) -> str:
    """'batch 8–32, 64–256 px': the span of the cells a median is over."""
    span = lambda c: f"{rows[c].min()}" + (f"–{rows[c].max()}" if rows[c].min() != rows[c].max() else "")  # noqa: E731
    return f"batch {span('batch_size')}, {span('resolution')} px"


def _memory_claim(impl: str, ratio: float) -> str | None:
    """The study's claim on one implementation's allocator peak against eager's, or None where it makes none."""
    if impl == "libtorch":
        return verdicts.HOLDS if verdicts.within(ratio, MEMORY_SAME) == "same" else verdicts.DOES_NOT_HOLD
    if impl.startswith("torchscript") or impl == "cudnn":
        side = verdicts.within(ratio, MEMORY_LOWER)
        return (verdicts.HOLDS if side == "lower" else verdicts.DOES_NOT_HOLD if side == "higher"
                else verdicts.NO_DIFFERENCE)
    return None


def memory_finding(sweep: pl.DataFrame) -> str:
    """Study: PyTorch ≈ LibTorch; TorchScript and cuDNN lower, especially below resolution 64 and batch 128.
    Read, like the chart beside it, from the allocator peak: what the implementation's own process held (exact
    per cell; the C++ programs count their device buffers the same way), median over the cells of the study's
    region, or over every cell where none was measured there (the sentence names which). NVML's device-wide
    figure is quoted beside it, never judged: it counts every process on the GPU and the CUDA context."""
    data = _study_rows(sweep).filter((pl.col("status") == "ok") & pl.col("alloc_peak_mib").is_not_null())
    if data.is_empty() or "eager" not in data["implementation"].to_list():
        return "Not measured here: no allocator peak was recorded (no GPU, or no eager cell)."
    resolution, batch = MEMORY_REGION
    region = data.filter((pl.col("resolution") < resolution) & (pl.col("batch_size") < batch))
    cells = (f"the cells below {resolution} px and batch {batch} ({_cell_range(region)})" if region.height else
             f"every cell ({_cell_range(data)}; none was measured below {resolution} px and batch {batch})")
    region = region if region.height else data
    medians = {impl: (rows["alloc_peak_mib"].median(), rows["mem_used_mib_max"].median())
               for impl in _order(region["implementation"])
               for rows in [region.filter(pl.col("implementation") == impl)]}
    if len(medians) == 1:
        return "Not measured here: only eager has an allocator peak in those cells, nothing to order it against."
    eager, eager_nvml = medians.pop("eager")
    parts, claims = [], []
    for impl, (peak, nvml) in medians.items():
        ratio = peak / eager
        device = f"; device-wide NVML {nvml / eager_nvml:.2f}×" if nvml and eager_nvml else ""
        parts.append(f"{impl} {ratio:.2f}× eager's ({peak:.0f} against {eager:.0f} MiB{device})")
        if (claim := _memory_claim(impl, ratio)) is not None:
            claims.append(claim)
    verdict = (verdicts.combine(claims) if claims
               else "cannot be judged (neither libtorch, TorchScript nor cudnn measured)")
    return (f"The study's memory ordering (LibTorch within {MEMORY_SAME:.0%} of PyTorch, TorchScript and cuDNN more "
            f"than {MEMORY_LOWER:.0%} lower, especially below {resolution} px and batch {batch}): {verdict} here "
            f"({_setting(data)}), by the allocator peak of each implementation's own process, median over {cells}: "
            f"{', '.join(parts)}.")


def _setting(rows: pl.DataFrame) -> str:
    return f"{rows['numerics'][0]}, {rows['transfer'][0]}"


def h2d_finding(h2d: pl.DataFrame) -> str:
    ok = h2d.filter((pl.col("status") == "ok") & pl.col("h2d_ms").is_not_null())
    if ok.is_empty():
        return "Not measured here: no host-to-device copy at the study's point."
    by = {t: ok.filter(pl.col("transfer") == t) for t in ok["transfer"].unique().to_list()}
    parts = [f"{t}: {d['h2d_mb'].median():.3f} MB in {d['h2d_ms'].median():.3f} ms" for t, d in sorted(by.items())]
    point = ok.row(0, named=True)
    text = (f"At batch {point['batch_size']} and {point['resolution']} px every implementation copies the same "
            f"bytes for the same transfer mode ({'; '.join(parts)}), against the study's 25.166 MB (PyTorch) and "
            f"12.583 MB (the others).")
    keys = ["numerics", "implementation"]
    side = lambda t, name: ok.filter(pl.col("transfer") == t).select(  # noqa: E731
        *keys, pl.col("h2d_ms").alias(name), pl.col("h2d_ms_low").alias(f"{name}_low"),
        pl.col("h2d_ms_high").alias(f"{name}_high"))
    pairs = side("float32-pinned", "pinned").join(side("float32-pageable", "pageable"), on=keys)
    if pairs.height:
        ratios, claims = [], []
        for r in pairs.sort(keys).iter_rows(named=True):
            ratio = verdicts.ratio_interval(r["pinned"], r["pinned_low"], r["pinned_high"], r["pageable"],
                                            r["pageable_low"], r["pageable_high"])
            ratios.append(f"{r['implementation']} ({r['numerics']}) {verdicts.ratio_text(*ratio)}")
            # "halves": at most 0.6 of the pageable copy's time, measurably below it
            claims.append(verdicts.NO_DIFFERENCE if verdicts.direction(*ratio[1:]) == 0 else
                          verdicts.HOLDS if ratio[0] <= 0.6 and verdicts.direction(*ratio[1:]) < 0
                          else verdicts.DOES_NOT_HOLD)
        text += (f" Pinned over pageable copy time: {'; '.join(ratios)}. The study's \"pinned memory halves the "
                 f"copy\" (at most 0.6×, the interval below 1): {verdicts.combine(claims)} here.")
    return text


def relu_rows(kernels: pl.DataFrame) -> pl.DataFrame:
    """The ReLU kernels of every implementation, and the study's: names with relu (ac_cudnn's relu_kernel and
    add_relu_kernel) or clamp (ATen's ReLU is a clamp at 0: launch_clamp_scalar in eager and LibTorch, as
    torch.profiler and ncu name it)."""
    return kernels.filter(pl.col("kernel").str.contains(f"(?i){RELU.pattern}"))


STUDY_RELU_AGAINST = ("libtorch", "cudnn")  # the study: PyTorch's grid (1024,2,1) against LibTorch's and cuDNN's


def _launch_groups(rows: pl.DataFrame) -> list[tuple[list[str], frozenset]]:
    """Implementations grouped by the set of (grid, block) their ReLU kernels launch, in the report's order."""
    sets: dict[frozenset, list[str]] = {}
    for impl in _order(rows["implementation"]):
        r = rows.filter(pl.col("implementation") == impl)
        sets.setdefault(frozenset(zip(r["grid"].to_list(), r["block"].to_list())), []).append(impl)
    return [(impls, launches) for launches, impls in sets.items()]


def kernel_finding(kernels: pl.DataFrame) -> str:
    """Per numerics: which implementations launch the same set of ReLU (grid, block) configurations, and each
    one's longest; then the study's claim, PyTorch launching a larger ReLU grid than LibTorch and cuDNN: eager's
    set against libtorch's and cudnn's (where profiled; else against every other implementation). It does not hold
    where the sets are the same, or eager's longest ReLU grid is not the larger."""
    measured = relu_rows(kernels.filter((pl.col("source") != "study") & (pl.col("status") == "ok")))
    if measured.is_empty():
        return ("Not measured here: no ReLU kernel was profiled (the device profilers need a GPU; the C++ "
                "programs' kernel jobs, where the sweep does not give the table, need ncu).")
    parts, claims = [], []
    for (numerics,), rows in sorted(measured.group_by("numerics"), key=lambda g: str(g[0])):
        groups = _launch_groups(rows)
        described = []
        for impls, launches in groups:
            longest = rows.filter(pl.col("implementation") == impls[0]).sort("mean_us", descending=True).row(
                0, named=True)
            n = len(launches)
            who = ", ".join(impls) + (" launch the same" if len(impls) > 1 else " launches its")
            described.append(f"{who} {n} configuration{'s' if n > 1 else ''} (longest: grid {longest['grid']}, "
                             f"block {longest['block']}, {longest['mean_us']:.1f} µs per call in {impls[0]})")
        parts.append(f"{numerics}: {'; '.join(described)}")
        by_impl = {impl: launches for impls, launches in groups for impl in impls}
        if "eager" not in by_impl:
            continue
        others = [i for i in STUDY_RELU_AGAINST if i in by_impl] or [i for i in by_impl if i != "eager"]
        longest = lambda impl: verdicts.grid_size(rows.filter(pl.col("implementation") == impl).sort(  # noqa: E731
            "mean_us", descending=True)["grid"][0])
        for other in others:
            larger = by_impl[other] != by_impl["eager"] and (longest("eager") or 0) > (longest(other) or 0)
            claims.append(verdicts.HOLDS if larger else verdicts.DOES_NOT_HOLD)
    verdict = (f"{verdicts.combine(claims)} here" if claims
               else "cannot be judged here (eager and another implementation must both be profiled)")
    return (f"ReLU kernels here, {' | '.join(parts)}. The study saw PyTorch launch a larger ReLU grid than LibTorch "
            f"and cuDNN ((1024,2,1) against (512,2,1), 690.6 against 372.6 µs per call): {verdict}.")


# ---------------------------------------------------------------------------------------------- tables
def h2d_display(h2d: pl.DataFrame) -> pl.DataFrame:
    if h2d.is_empty():
        return h2d
    return h2d.sort("numerics", "implementation", "transfer").select(
        "numerics", "implementation", "transfer", "device", "batch_size", "resolution", "status",
        pl.col("h2d_mb").alias("copy (MB)"), pl.col("h2d_ms").alias("copy (ms), median"),
        pl.col("study_h2d_mb").alias("study (MB)"), pl.col("study_h2d_ms").alias("study (ms)"))


# What a demangled kernel name repeats without telling kernels apart: namespaces, the lambdas ATen's elementwise
# kernels are instantiated with, and the trailing parameter list.
_NAMESPACES = re.compile(r"\b(?:at::native::|at::cuda::|at::detail::|at::|c10::|std::|detail::)"
                         r"|\(anonymous namespace\)::|<unnamed>::")  # torch.profiler's and ncu's spellings
_LAMBDAS = re.compile(r"(?:::)?(?:\{lambda\([^)]*\)#\d+\}|\[lambda\([^)]*\) \(instance \d+\)\])"
                      r"(?:::operator ?\(\)\(\) const)?")


def short_kernel(name: str) -> str:
    """A kernel's demangled name shortened for a table row: "void at::native::vectorized_elementwise_kernel<4,
    at::native::(anonymous namespace)::launch_clamp_scalar(...)::{lambda()#1}::operator()() const::..., ...>(int,
    ...)" becomes "vectorized_elementwise_kernel<4, launch_clamp_scalar(...)::λ::λ::λ, array<char*, 2ul> >"."""
    short = _LAMBDAS.sub("::λ", _NAMESPACES.sub("", name.removeprefix("void ")))
    depth = 0
    for i, ch in enumerate(short):  # the parameter list: the first "(" outside the template arguments
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "(" and depth == 0 and i > 0:
            return short[:i]
    return short


def kernel_display(kernels: pl.DataFrame) -> pl.DataFrame:
    """The kernel rows without their message, which says how a source profiled and is the same on every row of
    that source (kernel_sources shows it once); `kernel` is HTML: the short name, the full one as its tooltip."""
    if kernels.is_empty():
        return kernels
    label = pl.col("kernel").map_elements(
        lambda name: f'<span title="{html.escape(name)}">{html.escape(short_kernel(name))}</span>',
        return_dtype=pl.String)
    return kernels.filter(pl.col("status") == "ok").sort(  # the study's rows first
        pl.col("source") != "study", "source", "numerics", "implementation", "rank", nulls_last=True).select(
        "numerics", "implementation", "source", "rank", label.alias("kernel"), "calls", "total_us", "mean_us",
        "share", "grid", "block")


def kernel_sources(kernels: pl.DataFrame) -> pl.DataFrame:
    """One row per (source, status, message) of the kernel table, with the implementations and numerics it
    covers: how each source profiled, and why an implementation has no kernel rows (not_run, error)."""
    if kernels.is_empty():
        return kernels
    jobs = pl.concat_str("implementation", pl.lit(" ("), "numerics", pl.lit(")"))
    return kernels.with_columns(job=jobs).group_by("source", "status", "message", maintain_order=True).agg(
        pl.col("job").unique(maintain_order=True).sort().str.join(", ").alias("implementations")).sort(
        "status", "source").select("source", "status", "implementations", "message")


H2D_FORMATS = {"copy (MB)": "{:.3f}", "copy (ms), median": "{:.3f}", "study (MB)": "{:.3f}", "study (ms)": "{:.2f}"}
KERNEL_FORMATS = {"total_us": "{:.1f}", "mean_us": "{:.1f}", "share": "{:.1%}"}
