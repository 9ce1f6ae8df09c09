"""The sweep's report section on small synthetic tables: charts with oom marks, heat map, and the sentences on
whether the study's findings hold."""
from __future__ import annotations

import polars as pl
import pytest

from abstraction_cost import tables
from abstraction_cost.report import study_a_sweep as ss
from abstraction_cost.study_a.sweep import summary as sweep_summary
from tests.fixtures.report_rows import sweep_rows


_sweep = sweep_rows


def test_line_charts_mark_cells_without_a_time_by_status_and_use_log_axes():
    sweep = _sweep().with_columns(status=pl.when((pl.col("implementation") == "libtorch") & (pl.col("batch_size") == 8)
                                                 & (pl.col("resolution") == 256)).then(pl.lit("wrong_output"))
                                  .otherwise(pl.col("status")))
    chart = ss.line_chart(sweep, "time_per_sample_ms", "batch_size").to_dict()
    layers = chart["spec"]["layer"]
    assert [layer["mark"]["type"] for layer in layers] == ["line", "point", "rule"]   # the rule: intervals
    shape = layers[1]["encoding"]["shape"]
    assert shape["field"] == "status" and dict(zip(shape["scale"]["domain"], shape["scale"]["range"])) == {
        "oom": "cross", "wrong_output": "triangle-up", "error": "square"}
    values = chart["datasets"][chart["data"]["name"]]
    assert {r["status"] for r in values if r["status"] != "ok"} == {"oom", "wrong_output"}
    assert layers[0]["encoding"]["x"]["scale"]["type"] == "log"
    assert "at resolution 256" in chart["title"]


def _two_numerics() -> pl.DataFrame:
    """fp32 as _sweep; tf32 everything twice as fast and eager only 2× slower than the others."""
    return pl.concat([_sweep(), _sweep(eager_factor=(2.0, 2.0), numerics="tf32", scale=0.5)])


def test_charts_have_a_row_of_panels_per_numerics():
    chart = ss.line_chart(_two_numerics(), "time_per_sample_ms", "resolution").to_dict()
    assert chart["facet"]["row"]["field"] == "numerics" and chart["facet"]["row"]["sort"] == ["fp32", "tf32"]
    assert chart["facet"]["column"]["field"] == "transfer"
    heat = ss.heat_map(_two_numerics()).to_dict()
    color = heat["spec"]["layer"][0]["encoding"]["color"]
    assert color["legend"]["format"] == ".2f" and color["scale"]["domain"] == [0.1, 10.0]  # eager 10× slower
    assert heat["facet"]["row"]["sort"] == ["fp32, float32-pageable", "fp32, float32-pinned",
                                            "tf32, float32-pageable", "tf32, float32-pinned"]


def test_speed_is_against_eager_in_the_same_numerics():
    speed = ss.speed_vs_eager(_two_numerics())
    small = speed.filter(pl.col("resolution") == 32)
    assert set(small.filter(pl.col("numerics") == "fp32")["speedup"]) == {10.0}
    assert set(small.filter(pl.col("numerics") == "tf32")["speedup"]) == {2.0}
    measured = _sweep().filter((pl.col("status") == "ok") & (pl.col("implementation") != "eager"))
    assert speed.height == 2 * measured.height


def test_findings_read_the_studys_fp32_and_state_tf32_against_it():
    text = ss.time_finding(_two_numerics())
    assert "(fp32, float32-pageable" in text and "10.00× [9.61–10.41]" in text
    assert 'slower" (≥ 5× at the smallest cell, its interval above 1, for every implementation): holds.' in text
    only_tf32 = ss.time_finding(_sweep(eager_factor=(2.0, 2.0), numerics="tf32"))
    assert "(tf32, float32-pageable" in only_tf32 and "every implementation): does not hold." in only_tf32
    numerics = ss.numerics_finding(_two_numerics())
    assert "libtorch 2.00× (5 cells: tf32 measurably faster in 5, slower in 0" in numerics
    assert "eager 10.00× (5 cells" in numerics
    wide = ss.numerics_finding(pl.concat([_sweep(spread=0.6), _sweep(numerics="tf32", scale=0.9, spread=0.6)]))
    assert "libtorch 1.11× (5 cells: tf32 measurably faster in 0, slower in 0, no measurable difference at this " \
           "precision in 5)" in wide
    assert "Not measured" in ss.numerics_finding(_sweep())


def test_no_chart_without_measured_cells():
    assert ss.line_chart(_sweep().clear(), "time_per_sample_ms", "resolution") is None
    # also when there is no fixed point to filter on (an empty table)
    assert ss.line_chart(_sweep().clear(), "alloc_peak_mib", "batch_size") is None
    assert ss.heat_map(_sweep().filter(pl.col("implementation") == "eager")) is None


def test_heat_map_speed_against_eager():
    speed = ss.speed_vs_eager(_sweep())
    assert set(speed["implementation"]) == {"libtorch", "torchscript-cpp"}
    assert speed.filter(pl.col("resolution") == 32)["speedup"].to_list() == [10.0] * speed.filter(
        pl.col("resolution") == 32).height
    assert ss.heat_map(_sweep()) is not None


def _verdicts(text: str) -> list[str]:
    """The verdict after each claim's colon, in order."""
    import re
    return re.findall(r"\): (holds|does not hold|no measurable difference at this precision)[ .]", text)


def test_time_finding_holds_when_eager_is_10x_slower_and_narrowing():
    assert _verdicts(ss.time_finding(_sweep())) == ["holds", "holds"]


def test_time_finding_flips_with_the_numbers_and_their_precision():
    no_difference = "no measurable difference at this precision"
    # eager as fast as the others: their intervals overlap, so neither claim can be decided
    assert _verdicts(ss.time_finding(_sweep(eager_factor=(1.0, 1.0)))) == [no_difference, no_difference]
    # eager measurably slower, but 2×: not an order of magnitude; the gap the same at both ends
    assert _verdicts(ss.time_finding(_sweep(eager_factor=(2.0, 2.0)))) == ["does not hold", no_difference]
    # eager faster than the others
    assert _verdicts(ss.time_finding(_sweep(eager_factor=(0.5, 0.5))))[0] == "does not hold"
    # the gap widening towards the largest cell
    assert _verdicts(ss.time_finding(_sweep(eager_factor=(6.0, 12.0)))) == ["holds", "does not hold"]
    # 10× measured with intervals too wide to separate the two ends: the narrowing is not shown
    assert _verdicts(ss.time_finding(_sweep(spread=0.5))) == ["holds", no_difference]
    # no interval at all: no difference can be claimed
    text = ss.time_finding(_sweep(spread=None))
    assert "10.00× (no interval)" in text and _verdicts(text) == [no_difference, no_difference]


def test_heat_map_marks_ratios_whose_interval_holds_one():
    speed = ss.speed_vs_eager(_sweep(eager_factor=(1.0, 10.0)))
    assert speed.filter(pl.col("resolution") == 32)["speedup_includes_one"].all()
    assert not speed.filter(pl.col("resolution") == 256)["speedup_includes_one"].any()
    text = ss.heat_map(_sweep()).to_dict()["spec"]["layer"][1]["encoding"]
    assert text["opacity"]["condition"]["test"] == "datum.speedup_includes_one"


def test_memory_finding_reads_the_processes_own_peak_and_flips():
    text = ss.memory_finding(_sweep())
    assert _verdicts(text) == ["holds"] and "torchscript-cpp 0.80× eager's (800 against 1000 MiB" in text
    assert "device-wide NVML 0.80×" in text      # quoted beside it, not judged
    assert _verdicts(ss.memory_finding(_sweep(torchscript_memory=1.01))) == [
        "no measurable difference at this precision"]
    assert _verdicts(ss.memory_finding(_sweep(torchscript_memory=1.3))) == ["does not hold"]
    assert _verdicts(ss.memory_finding(_sweep(libtorch_memory=1.5))) == ["does not hold"]
    # the device-wide figure moving (another process, the context) changes nothing
    nvml_moved = _sweep().with_columns(mem_used_mib_max=pl.col("mem_used_mib_max") * 2.5)
    assert _verdicts(ss.memory_finding(nvml_moved)) == ["holds"]
    assert "Not measured" in ss.memory_finding(_sweep().with_columns(pl.lit(None).alias("alloc_peak_mib")))
    assert "only eager" in ss.memory_finding(_sweep().filter(pl.col("implementation") == "eager"))


def test_memory_finding_judges_cudnn_lower_and_names_the_cells_its_medians_are_over():
    def with_cudnn(factor: float) -> pl.DataFrame:
        sweep = _sweep()
        cudnn = sweep.filter(pl.col("implementation") == "libtorch").with_columns(
            implementation=pl.lit("cudnn"), alloc_peak_mib=pl.col("alloc_peak_mib") * factor)
        return pl.concat([sweep, cudnn])
    # the study's cuDNN lower: on the H100 (R1) cudnn held 1.13× eager's peak, beside a verdict that left it out
    assert _verdicts(ss.memory_finding(with_cudnn(1.13))) == ["does not hold"]
    assert _verdicts(ss.memory_finding(with_cudnn(0.8))) == ["holds"]
    assert "median over the cells below 64 px and batch 128 (batch 8–64, 32 px)" in ss.memory_finding(_sweep())
    # a grid with no cell in the study's region: the sentence says its medians are over every cell
    text = ss.memory_finding(_sweep().filter(pl.col("resolution") == 256))
    assert "median over every cell (batch 8–32, 256 px; none was measured below 64 px and batch 128)" in text


def test_memory_charts_plot_the_processes_peak_and_the_device_wide_figure_apart():
    own = ss.line_chart(_sweep(), "alloc_peak_mib", "resolution").to_dict()
    assert own["title"].startswith("allocator peak (MiB), the process's own against resolution")
    device = ss.line_chart(_sweep(), "mem_used_mib_max", "resolution").to_dict()
    assert device["title"].startswith("device memory used (MiB, NVML, device-wide)")
    with pytest.raises(ValueError, match="no metric 'memory_mib'"):
        ss.line_chart(_sweep(), "memory_mib", "resolution")


def test_time_chart_draws_each_points_interval():
    layers = ss.line_chart(_sweep(), "time_per_sample_ms", "batch_size").to_dict()["spec"]["layer"]
    rule = [layer for layer in layers if layer["mark"]["type"] == "rule"]
    assert rule and rule[0]["encoding"]["y2"]["field"] == "time_per_sample_ms_high"
    no_interval = ss.line_chart(_sweep(spread=None), "time_per_sample_ms", "batch_size").to_dict()["spec"]["layer"]
    assert [layer["mark"]["type"] for layer in no_interval] == ["line", "point"]


def test_h2d_rows_and_finding_with_the_studys_numbers():
    h2d = tables.frame("sweep_h2d", sweep_summary.h2d_rows(_sweep(), 32, 256))
    eager = h2d.filter((pl.col("implementation") == "eager") & (pl.col("transfer") == "float32-pageable"))
    assert eager["study_h2d_mb"][0] == 25.165824 and eager["h2d_bytes"][0] == 32 * 3 * 256 * 256 * 4
    assert h2d.filter(pl.col("transfer") == "float32-pinned")["study_h2d_mb"].null_count() == 3
    # no interval on the copies: the halving cannot be claimed
    assert "eager (fp32) 0.50× (no interval)" in ss.h2d_finding(h2d)
    assert ss.h2d_finding(h2d).endswith("no measurable difference at this precision here.")
    timed = lambda spread, pinned=1.0: tables.frame("sweep_h2d", sweep_summary.h2d_rows(  # noqa: E731
        _sweep().with_columns(h2d_ms=pl.when(pl.col("transfer").str.ends_with("pinned")).then(pinned)
                              .otherwise(pl.col("h2d_ms"))).with_columns(
            h2d_ms_low=pl.col("h2d_ms") * (1 - spread), h2d_ms_high=pl.col("h2d_ms") * (1 + spread)), 32, 256))
    assert ss.h2d_finding(timed(0.05)).endswith("(at most 0.6×, the interval below 1): holds here.")
    assert ss.h2d_finding(timed(0.05, pinned=1.6)).endswith("does not hold here.")   # 0.8×: faster, not half
    assert ss.h2d_finding(timed(0.5)).endswith("no measurable difference at this precision here.")


def _relu(launches: dict[str, list[tuple[str, float]]]) -> pl.DataFrame:
    """Kernel rows of one numerics: per implementation its ReLU launches as (grid, µs per call), plus the study's."""
    defaults = dict.fromkeys(tables.schema("sweep_kernels"))
    measured = [{**defaults, "run_id": "r", "implementation": impl, "numerics": "fp32", "source": "torch.profiler",
                 "status": "ok", "kernel": "vectorized_elementwise_kernel<clamp_min_scalar>", "calls": 49,
                 "mean_us": us, "share": 0.1, "grid": grid, "block": "(128,1,1)"}
                for impl, rows in launches.items() for grid, us in rows]
    return tables.frame("sweep_kernels", measured + sweep_summary.study_kernel_rows())


def test_kernel_finding_reads_relu_rows_and_flips():
    larger = _relu({"eager": [("(1024,2,1)", 600.0)], "libtorch": [("(512,2,1)", 300.0)]})
    assert ss.relu_rows(larger).height == 4
    text = ss.kernel_finding(larger)
    assert "eager launches its 1 configuration" in text and text.endswith("per call): holds here.")
    # the same configurations in eager, libtorch and both TorchScripts: the sentence says so and the claim fails
    six = [(f"({g},1,1)", 10.0 * g) for g in (8, 16, 32, 64, 128, 256)]
    same = _relu({"eager": six, "libtorch": six, "torchscript-python": six, "torchscript-cpp": six,
                  "cudnn": [("(4,1,1)", 5.0)]})
    text = ss.kernel_finding(same)
    assert "eager, torchscript-python, torchscript-cpp, libtorch launch the same 6 configurations" in text
    assert "cudnn launches its 1 configuration" in text and "different grids" not in text
    assert text.endswith("does not hold here.")
    # eager's longest ReLU grid the smaller
    assert ss.kernel_finding(_relu({"eager": [("(256,1,1)", 1.0)], "libtorch": [("(512,2,1)", 2.0)]})).endswith(
        "does not hold here.")
    assert "cannot be judged" in ss.kernel_finding(_relu({"libtorch": [("(512,2,1)", 2.0)]}))
    assert "Not measured" in ss.kernel_finding(larger.filter(pl.col("source") == "study"))


def test_kernel_tables_state_each_sources_message_once():
    """A source's message (how it profiled) is the same on all its rows: one row of kernel_sources says it, the
    kernel tables leave it out; an implementation without kernels is in kernel_sources with its status."""
    defaults = dict.fromkeys(tables.schema("sweep_kernels"))
    how = "ncu, clocks and caches left as they are"
    rows = [{**defaults, "run_id": "r", "implementation": "libtorch", "numerics": "fp32", "source": "ncu 2025.3",
             "status": "ok", "message": how, "rank": rank, "kernel": f"k{rank}", "calls": 1, "mean_us": 1.0,
             "share": 0.1, "grid": "(1,1,1)", "block": "(1,1,1)"} for rank in (1, 2, 3)]
    rows.append({**defaults, "run_id": "s", "implementation": "cudnn", "numerics": "fp32", "source": "ncu",
                 "status": "not_run", "message": "no ncu on PATH"})
    kernels = tables.frame("sweep_kernels", rows)
    shown = ss.kernel_display(kernels)
    assert "message" not in shown.columns and shown["rank"].to_list() == [1, 2, 3]
    sources = ss.kernel_sources(kernels)
    assert sources.rows() == [("ncu", "not_run", "cudnn (fp32)", "no ncu on PATH"),
                              ("ncu 2025.3", "ok", "libtorch (fp32)", how)]


def test_charts_tick_at_the_grids_values():
    chart = ss.line_chart(_sweep(), "time_per_sample_ms", "batch_size").to_dict()
    assert chart["spec"]["layer"][0]["encoding"]["x"]["axis"]["values"] == [8, 32, 64]


def test_kernel_names_are_shortened_with_the_full_name_as_tooltip():
    clamp = ("launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)"
             "::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}")
    profiler = (f"void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::{clamp}, "
                f"std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::{clamp}, std::array<char*, 2ul>)")
    ncu = ("void at::native::vectorized_elementwise_kernel<4, at::native::<unnamed>::launch_clamp_scalar("
           "at::TensorIteratorBase &, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::"
           "[lambda() (instance 1)]::operator ()() const::[lambda(float) (instance 1)], std::array<char *, 2>>"
           "(int, T2, T3)")
    assert ss.short_kernel(profiler) == ("vectorized_elementwise_kernel<4, launch_clamp_scalar(TensorIteratorBase&, "
                                         "Scalar, Scalar, ClampLimits)::λ::λ::λ, array<char*, 2ul> >")
    assert ss.short_kernel(ncu) == ("vectorized_elementwise_kernel<4, launch_clamp_scalar(TensorIteratorBase &, "
                                    "Scalar, Scalar, ClampLimits)::λ::λ, array<char *, 2>>")
    assert ss.short_kernel("ac::<unnamed>::relu_kernel(float *, long)") == "ac::relu_kernel"
    defaults = dict.fromkeys(tables.schema("sweep_kernels"))
    kernels = tables.frame("sweep_kernels", [{**defaults, "run_id": "r", "implementation": "eager", "numerics": "fp32",
                                             "source": "torch.profiler", "status": "ok", "rank": 1,
                                             "kernel": profiler}])
    cell = ss.kernel_display(kernels)["kernel"][0]
    assert cell.startswith('<span title="void at::native::vectorized_elementwise_kernel&lt;4,') and \
        cell.endswith("array&lt;char*, 2ul&gt; &gt;</span>")


def _paired(sweep: pl.DataFrame, speedup: float, low: float, high: float, turns: int = 6) -> pl.DataFrame:
    """Table sweep_speedups for every implementation's ok cells of `sweep`, all at one speedup and interval."""
    defaults = dict.fromkeys(tables.schema("sweep_speedups"))
    cells = sweep.filter((pl.col("status") == "ok") & (pl.col("implementation") != "eager"))
    return tables.frame("sweep_speedups", [
        {**defaults, **{k: r[k] for k in ("run_id", "numerics", "implementation", "cell", "batch_size", "resolution",
                                          "transfer")},
         "baseline": "eager", "speedup": speedup, "speedup_low": low, "speedup_high": high,
         "speedup_includes_one": None if low is None else low <= 1 <= high, "paired_turns": turns}
        for r in cells.iter_rows(named=True)])


def test_paired_speedups_of_the_interleaved_sweep_replace_the_quotient():
    sweep = _sweep(eager_factor=(1.0, 1.0), spread=0.3)   # apart: eager and the others indistinguishable
    assert ss.speed_vs_eager(sweep)["speedup_includes_one"].all()
    paired = _paired(sweep, 1.05, 1.02, 1.08)              # in paired turns: eager measurably 5% slower
    speed = ss.speed_vs_eager(sweep, paired)
    assert set(speed["interval"]) == {"paired"} and not speed["speedup_includes_one"].any()
    text = ss.time_finding(sweep, paired)
    assert "1.05× [1.02–1.08]" in text and "from paired turns of the interleaved sweep" in text
    assert _verdicts(text)[0] == "does not hold"            # measurably slower, not by an order of magnitude
    # a cell the interleaved sweep measured one implementation at a time (no paired turns) keeps the quotient
    alone = ss.speed_vs_eager(sweep, _paired(sweep, 1.05, None, None, turns=0))
    assert set(alone["interval"]) == {"quotient"}
    heat = ss.heat_map(sweep, paired=paired).to_dict()
    assert {r["interval"] for r in heat["datasets"][heat["data"]["name"]]} == {"paired"}
