"""Study A's backend comparison in evaluation (table backend_comparison, computed by rule compare_backends):
a chart of time per sample with bootstrap intervals, and the table with memory and parity errors beside it."""
from __future__ import annotations

import altair as alt
import polars as pl

from .. import implementations
from ..measure.numerics import NUMERICS


def time_chart(comparison: pl.DataFrame, width: int = 420) -> alt.Chart | None:
    """Median time per sample per implementation, with its 95% interval; None when nothing was measured."""
    ok = comparison.filter((pl.col("status") == "ok") & pl.col("time_per_sample_ms").is_not_null())
    if ok.is_empty():
        return None
    data = ok.select("implementation", "numerics", "runtime", "method", "device", "batch_size", "resolution",
                     "time_per_sample_ms", "time_per_sample_ms_low", "time_per_sample_ms_high", "speedup_vs_eager")
    order = implementations.order(data["implementation"].to_list())
    y = alt.Y("implementation:N", sort=order, title=None)
    tooltip = [alt.Tooltip(c) for c in data.columns]
    bars = alt.Chart().mark_bar().encode(
        x=alt.X("time_per_sample_ms:Q", title="eval time per sample (ms), median", scale=alt.Scale(zero=True)),
        y=y, color=alt.Color("runtime:N", title="runs from"), tooltip=tooltip)
    interval = alt.Chart().mark_rule(color="black").encode(
        x="time_per_sample_ms_low:Q", x2="time_per_sample_ms_high:Q", y=y)
    # one panel per numerics (study_a.backends.numerics), fp32 (the study's) first: times are compared within a
    # numerics, never across
    numerics = [n for n in NUMERICS if n in data["numerics"].to_list()]
    return (alt.layer(bars, interval, data=data).properties(width=width, height=28 * len(order))
            .facet(row=alt.Row("numerics:N", sort=numerics, title=None)))


def _interval(estimate, low, high, digits: int = 3) -> str | None:
    if estimate is None:
        return None
    return f"{estimate:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _speedup(estimate, low, high, includes_one) -> str | None:
    text = _interval(estimate, low, high, 2)
    if text is None:
        return None
    return text + (" (interval includes 1)" if includes_one else "")


def _algorithms(r: dict) -> str | None:
    """The cudnn implementations' algorithm choice and the workspace they used (the others leave it to torch)."""
    if r.get("conv_algo") is None:
        return None
    workspace = r.get("workspace_mib")
    return r["conv_algo"] + (f", {workspace:.0f} MiB workspace" if workspace is not None else "")


def comparison_display(comparison: pl.DataFrame) -> pl.DataFrame:
    """backend_comparison with readable columns: intervals as 'median [low, high]', parity as a verdict."""
    rows = comparison.iter_rows(named=True)
    out = []
    for r in rows:
        parity = None
        if r["implementation"] == "eager":
            parity = "reference"
        elif r["max_abs_logit_diff"] is not None:
            verdict = "same" if r["parity_ok"] else "DIFFERENT"
            parity = f"{verdict}: {r['max_abs_logit_diff']:.2e} ({r['max_rel_logit_diff']:.1e} rel.)"
        elif r["status"] == "ok":
            parity = r["parity_message"]
        out.append({
            "numerics": r["numerics"], "implementation": r["implementation"], "made by": r["method"], "device": r["device"],
            "status": r["status"] if r["status"] == "ok" else f"{r['status']}: {r['message']}",
            "ms/sample [95% CI]": _interval(r["time_per_sample_ms"], r["time_per_sample_ms_low"],
                                            r["time_per_sample_ms_high"]),
            "speedup vs eager": "baseline" if r["implementation"] == "eager" else _speedup(
                r["speedup_vs_eager"], r["speedup_vs_eager_low"], r["speedup_vs_eager_high"],
                r["speedup_vs_eager_includes_one"]),
            "device memory (MiB, NVML)": r["mem_used_mib_max"], "allocator peak (MiB)": r["alloc_peak_mib"],
            "max |Δlogit| vs eager": parity, "same argmax": r["argmax_agreement"],
            "prepare (s)": r["prepare_s"], "convolution algorithms": _algorithms(r),
            "measured over": _measured_over(r),
        })
    columns = ["numerics", "implementation", "made by", "device", "status", "ms/sample [95% CI]", "speedup vs eager",
               "measured over",
               "device memory (MiB, NVML)", "allocator peak (MiB)", "max |Δlogit| vs eager", "same argmax",
               "prepare (s)", "convolution algorithms"]
    schema = {c: (pl.Float64 if c in ("device memory (MiB, NVML)", "allocator peak (MiB)", "same argmax",
                                      "prepare (s)") else pl.String) for c in columns}
    ranks = {n: i for i, n in enumerate(NUMERICS)}
    out.sort(key=lambda r: (ranks.get(r["numerics"], len(ranks)), implementations.rank(r["implementation"])))
    return pl.DataFrame(out, schema=schema)


def _measured_over(r: dict) -> str | None:
    """What the row's time rests on: invocations, calls and their spread (interleaved), or calls (serial)."""
    if r.get("time_per_sample_ms") is None:
        return None
    if r.get("protocol") != "interleaved" or not r.get("invocations"):
        return f"{r['repeats']} calls, one process"
    spread = f", spread {r['invocation_spread']:.2f}×" if r.get("invocation_spread") else ""
    steady = "" if r.get("steady") in (True, None) else ", NOT STEADY"
    return f"{r['invocations']} invocations, {r['repeats']} calls{spread}{steady}"


FORMATS = {"device memory (MiB, NVML)": "{:.0f}", "allocator peak (MiB)": "{:.0f}", "same argmax": "{:.0%}",
           "prepare (s)": "{:.1f}"}


def setting(comparison: pl.DataFrame) -> str | None:
    """'batch 32 at 224×224 on cuda' from the table, or None when it is empty."""
    if comparison.is_empty():
        return None
    r = comparison.row(0, named=True)
    return f"batch {r['batch_size']} at {r['resolution']}×{r['resolution']} on {r['device']}"


def time_finding(comparison: pl.DataFrame, threshold: float = 5.0) -> str:
    """The study's "PyTorch almost an order of magnitude slower than all other implementations", per numerics,
    from the chart's speedups and their intervals (verdicts.at_least: eager ≥ threshold× slower, the interval
    above 1); the study's implementations only (implementations.in_study: not the baselines beyond it)."""
    from . import verdicts

    rows = comparison.filter((pl.col("status") == "ok") & (pl.col("implementation") != "eager")
                             & pl.col("speedup_vs_eager").is_not_null()
                             & pl.col("implementation").map_elements(implementations.in_study,
                                                                     return_dtype=pl.Boolean))
    if rows.is_empty():
        return "Not measured here: no implementation has a speedup against eager."
    ranks = {n: i for i, n in enumerate(NUMERICS)}
    parts = []
    for numerics in sorted(set(rows["numerics"]), key=lambda n: ranks.get(n, len(ranks))):
        part = sorted(rows.filter(pl.col("numerics") == numerics).iter_rows(named=True),
                      key=lambda r: implementations.rank(r["implementation"]))
        claims = [verdicts.at_least(r["speedup_vs_eager"], r["speedup_vs_eager_low"], r["speedup_vs_eager_high"],
                                    threshold) for r in part]
        ratios = ", ".join(f"{r['implementation']} " + verdicts.ratio_text(
            r["speedup_vs_eager"], r["speedup_vs_eager_low"], r["speedup_vs_eager_high"]) for r in part)
        parts.append(f"{numerics}: {verdicts.combine(claims)} ({ratios})")
    return (f"The study's \"almost an order of magnitude slower\" (eager ≥ {threshold:g}× slower than every other "
            f"implementation, the speedup's 95% interval above 1), per numerics: {'; '.join(parts)}.")
