"""The sweep's report section on small synthetic tables: charts with oom marks, heat map, and the sentences on
whether the study's findings hold."""
from __future__ import annotations

import itertools

import polars as pl

from abstraction_cost import tables
from abstraction_cost.backends import sweep_summary
from abstraction_cost.report import study_a_sweep as ss


def _sweep(eager_factor=(10.0, 4.0), numerics="fp32", scale=1.0) -> pl.DataFrame:
    """eager 10× slower at the small cells, 4× at the large; batch 64 at 256 px oom for every implementation;
    every time × scale."""
    defaults = dict.fromkeys(tables.schema("sweep"))
    rows = []
    for impl, transfer, (i, (res, batch)) in itertools.product(
            ("eager", "libtorch", "torchscript-cpp"), ("float32-pageable", "float32-pinned"),
            enumerate(itertools.product((32, 256), (8, 32, 64)))):
        small = res == 32
        base = 0.1 * res / 32 * scale
        ms = base * (eager_factor[0] if small else eager_factor[1]) if impl == "eager" else base
        oom = res == 256 and batch == 64
        rows.append({**defaults, "run_id": f"{impl}-{transfer}-{numerics}", "implementation": impl,
                     "transfer": transfer, "numerics": numerics,
                     "device": "cuda", "dataset": "voc2012", "cell": i, "batch_size": batch, "resolution": res,
                     "status": "oom" if oom else "ok", "message": "CUDA out of memory" if oom else None,
                     "time_per_sample_ms": None if oom else ms, "time_ms": None if oom else ms * batch,
                     "h2d_bytes": batch * 3 * res * res * 4, "h2d_ms": 2.0 if transfer.endswith("pageable") else 1.0,
                     "mem_used_mib_max": None if oom else (800.0 if impl == "torchscript-cpp" else 1000.0)})
    return tables.frame("sweep", rows)


def test_line_charts_mark_cells_without_a_time_by_status_and_use_log_axes():
    sweep = _sweep().with_columns(status=pl.when((pl.col("implementation") == "libtorch") & (pl.col("batch_size") == 8)
                                                 & (pl.col("resolution") == 256)).then(pl.lit("wrong_output"))
                                  .otherwise(pl.col("status")))
    chart = ss.line_chart(sweep, "time_per_sample_ms", "batch_size").to_dict()
    layers = chart["spec"]["layer"]
    assert [layer["mark"]["type"] for layer in layers] == ["line", "point"]
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
    assert "holds here (fp32, float32-pageable)" in text and "10.00×" in text
    only_tf32 = ss.time_finding(_sweep(eager_factor=(2.0, 2.0), numerics="tf32"))
    assert "(tf32, float32-pageable)" in only_tf32 and "does not hold" in only_tf32
    numerics = ss.numerics_finding(_two_numerics())
    assert "libtorch 2.00× (5 cells)" in numerics and "eager 10.00× (5 cells)" in numerics
    assert "Not measured" in ss.numerics_finding(_sweep())


def test_no_chart_without_measured_cells():
    assert ss.line_chart(_sweep().clear(), "time_per_sample_ms", "resolution") is None
    # the memory chart's column is derived, also when there is no fixed point to filter on (an empty table)
    assert ss.line_chart(_sweep().clear(), "memory_mib", "batch_size") is None
    assert ss.heat_map(_sweep().filter(pl.col("implementation") == "eager")) is None


def test_heat_map_speed_against_eager():
    speed = ss.speed_vs_eager(_sweep())
    assert set(speed["implementation"]) == {"libtorch", "torchscript-cpp"}
    assert speed.filter(pl.col("resolution") == 32)["speedup"].to_list() == [10.0] * speed.filter(
        pl.col("resolution") == 32).height
    assert ss.heat_map(_sweep()) is not None


def test_time_finding_holds_when_eager_is_10x_slower_and_narrowing():
    assert "holds here" in ss.time_finding(_sweep())
    assert "does not hold" in ss.time_finding(_sweep(eager_factor=(1.0, 1.0)))


def test_memory_finding_libtorch_same_torchscript_lower():
    text = ss.memory_finding(_sweep())
    assert "holds here" in text and "torchscript-cpp 0.80× eager's" in text
    assert "Not measured" in ss.memory_finding(_sweep().with_columns(pl.lit(None).alias("mem_used_mib_max")))
    assert "only eager" in ss.memory_finding(_sweep().filter(pl.col("implementation") == "eager"))


def test_memory_comes_from_one_source_for_every_cell():
    """NVML where every measured cell was sampled, else the allocator's peak everywhere: never NVML for some cells
    and the allocator for others (the CUDA context in some readings and not in others)."""
    both = _sweep().with_columns(alloc_peak_mib=pl.col("mem_used_mib_max") / 2)
    data, label = ss.with_memory(both)
    assert label == "device memory (MiB, NVML)" and data["memory_mib"].equals(both["mem_used_mib_max"])
    short = both.with_columns(mem_used_mib_max=pl.when(pl.col("resolution") == 32).then(None)
                              .otherwise(pl.col("mem_used_mib_max")))  # short cells NVML did not sample
    data, label = ss.with_memory(short)
    assert label == "allocator peak (MiB)" and data["memory_mib"].equals(both["alloc_peak_mib"])
    chart = ss.line_chart(short, "memory_mib", "resolution").to_dict()
    assert chart["title"].startswith("allocator peak (MiB) against resolution")
    assert "median allocator peak (MiB) of those cells" in ss.memory_finding(short)


def test_h2d_rows_and_finding_with_the_studys_numbers():
    h2d = tables.frame("sweep_h2d", sweep_summary.h2d_rows(_sweep(), 32, 256))
    eager = h2d.filter((pl.col("implementation") == "eager") & (pl.col("transfer") == "float32-pageable"))
    assert eager["study_h2d_mb"][0] == 25.165824 and eager["h2d_bytes"][0] == 32 * 3 * 256 * 256 * 4
    assert h2d.filter(pl.col("transfer") == "float32-pinned")["study_h2d_mb"].null_count() == 3
    assert "0.50× the pageable copy's time" in ss.h2d_finding(h2d) and "holds here" in ss.h2d_finding(h2d)


def test_kernel_finding_reads_relu_rows():
    defaults = dict.fromkeys(tables.schema("sweep_kernels"))
    measured = [{**defaults, "run_id": "r", "implementation": impl, "source": "torch.profiler", "status": "ok",
                 "kernel": "vectorized_elementwise_kernel<clamp_min_scalar>", "calls": 49, "mean_us": us,
                 "share": 0.1, "grid": grid, "block": "(128,1,1)"}
                for impl, grid, us in (("eager", "(1024,2,1)", 600.0), ("torchscript-python", "(512,2,1)", 300.0))]
    kernels = tables.frame("sweep_kernels", measured + sweep_summary.study_kernel_rows())
    assert ss.relu_rows(kernels).height == 4
    assert "different grids" in ss.kernel_finding(kernels)
    # the same (grid, block) set in every implementation of one numerics: the study's finding does not hold
    measured_grid = pl.when(pl.col("source") == "study").then(pl.col("grid")).otherwise(pl.lit("(8,1,1)"))
    same = kernels.with_columns(grid=measured_grid)
    assert "launch the same grids and blocks" in ss.kernel_finding(same)
    assert "Not measured" in ss.kernel_finding(kernels.filter(pl.col("source") == "study"))


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
