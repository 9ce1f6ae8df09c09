"""Where each level's time goes: the profiled pass (measure/profiled.py) on the CPU with fake device traces, the
decomposition of sweep rows and of the backend comparison's cell by the pairs of implementations
(derived/decomposition.py) and the roofline against the run's matmul peak (derived/roofline.py)."""
from __future__ import annotations

import polars as pl
import pytest
import torch

from abstraction_cost import tables
from abstraction_cost.derived import decomposition, roofline
from abstraction_cost.measure import profiled


def _kernel(ts: float, dur: float, name: str = "k") -> dict:
    return {"cat": "kernel", "name": name, "ts": ts, "dur": dur}


def test_device_summary_sums_kernels_per_call_and_counts_overlapping_work_once():
    events = [_kernel(0, 100), _kernel(50, 100), {"cat": "gpu_memcpy", "ts": 300, "dur": 50},
              _kernel(1000, 200), {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "dur": 5},
              {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10, "dur": 5},
              {"cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 20, "dur": 5},
              {"cat": "cuda_runtime", "name": "cudaMalloc", "ts": 30, "dur": 5}]
    s = profiled.device_summary(events, calls=2, wall_ms=0.5)
    assert s["device_ms"] == pytest.approx(0.4 / 2)          # 100 + 100 + 200 µs over two calls
    assert s["memcpy_ms"] == pytest.approx(0.05 / 2)
    assert s["device_busy_ms"] == pytest.approx(0.4 / 2)     # [0,150) ∪ [300,350) ∪ [1000,1200): 400 µs
    assert s["kernels"] == 1.5 and s["launch_calls"] == 1.5  # cudaMalloc is no launch
    assert s["device_idle_ms"] == pytest.approx(0.5 - 0.2)
    assert s["device_message"] is None


def test_device_records_outside_the_host_events_span_are_left_out_and_counted():
    host = [{"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ph": "X", "ts": 1e6, "dur": 5},
            {"cat": "cpu_op", "name": "aten::conv2d", "ph": "X", "ts": 1e6, "dur": 500}]
    events = host + [_kernel(1e6 + 10, 100), _kernel(1e6 + 20, 100), _kernel(-1e14, 100)]
    s = profiled.device_summary(events, calls=1, wall_ms=1.0)
    assert s["device_ms"] == pytest.approx(0.2) and s["kernels"] == 2
    assert s["device_message"] == "1 device records outside the profiled window left out (CUPTI timestamps)"


def test_a_trace_without_kernels_leaves_the_device_columns_null_with_the_reason():
    s = profiled.device_summary([{"cat": "cpu_op", "name": "aten::add", "ts": 0, "dur": 3}], 1, 1.0)
    assert all(s[c] is None for c in profiled.DEVICE_COLUMNS) and "no CUDA kernel" in s["device_message"]


def test_the_profiled_pass_on_the_cpu_measures_the_host_and_says_why_there_is_no_device_time():
    x = torch.randn(64, 64)
    row = profiled.profiled_pass(lambda: x @ x, torch.device("cpu"), 3)
    assert row["profiled_calls"] == 3 and row["host_issue_ms"] > 0 and row["wall_ms"] >= row["host_issue_ms"] * 0.5
    assert row["host_cpu_ms"] >= 0 and row["device_ms"] is None and row["device_message"] == profiled.NO_CUDA


def test_the_profiled_pass_takes_fake_device_times_and_a_failing_profiler_leaves_nulls():
    fake = lambda call, calls: [_kernel(i * 1000, 250) for i in range(calls)]  # noqa: E731
    row = profiled.profiled_pass(lambda: None, torch.device("cpu"), 4, trace=fake)
    assert row["device_ms"] == pytest.approx(0.25) and row["kernels"] == 1 and row["device_message"] is None

    def broken(call, calls):
        raise RuntimeError("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES\nmore")
    row = profiled.profiled_pass(lambda: None, torch.device("cpu"), 2, trace=broken)
    assert row["device_ms"] is None and row["host_issue_ms"] is not None
    assert row["device_message"] == "torch.profiler failed: RuntimeError: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"
    with pytest.raises(ValueError, match="calls must be >= 1"):
        profiled.profiled_pass(lambda: None, torch.device("cpu"), 0)


# ------------------------------------------------------------------------------------------------ decomposition
# One cell (batch 8, 64 px): times per call (ms) and fake device times, chosen so that every level differs.
TIMES = {"eager": 10.0, "torchscript-cpp": 7.0, "libtorch": 6.5, "cudnn": 5.0, "cudnn-graphs": 3.5,
         "compiled": 4.0, "torchscript-python": 7.2}
DEVICE = {"eager": 2.0, "torchscript-cpp": 2.0, "libtorch": 2.0, "cudnn": 1.9, "cudnn-graphs": 1.9, "compiled": 1.4,
          "torchscript-python": 2.0}


def _sweep(times=TIMES, cell=0, batch=8, resolution=64) -> pl.DataFrame:
    rows = [{"implementation": i, "numerics": "fp32", "cell": cell, "batch_size": batch, "resolution": resolution,
             "transfer": "float32-pageable", "status": "ok", "time_ms": t, "h2d_ms": 0.5, "run_id": "r1"}
            for i, t in times.items()]
    return tables.frame("sweep", [{**dict.fromkeys(tables.schema("sweep")), **r} for r in rows])


def _profile(device=DEVICE, cell=0, idle=None) -> pl.DataFrame:
    rows = [{"implementation": i, "numerics": "fp32", "cell": cell, "status": "ok", "profiled_calls": 5,
             "host_issue_ms": TIMES[i] * 0.8, "wall_ms": TIMES[i], "device_ms": d,
             "device_message": None if d is not None else "no CUDA device: no kernels to profile",
             "device_idle_ms": None if d is None else (idle if idle is not None else TIMES[i] - d), "run_id": "r1"}
            for i, d in device.items()]
    return tables.frame("sweep_profile", [{**dict.fromkeys(tables.schema("sweep_profile")), **r} for r in rows])


def _by_impl(df: pl.DataFrame) -> dict:
    return {r["implementation"]: r for r in df.iter_rows(named=True)}


def test_each_level_is_the_difference_of_its_pair_and_charged_to_the_implementations_that_carry_it():
    d = _by_impl(decomposition.decomposition_rows(_sweep(), _profile()))
    eager, cudnn, graphs = d["eager"], d["cudnn"], d["cudnn-graphs"]
    assert eager["python_ms"] == pytest.approx(3.0) and eager["dispatch_ms"] == pytest.approx(1.5)
    assert eager["launch_ms"] == pytest.approx(1.5)
    # eager's stack: 0.5 transfer + 3 + 1.5 + 1.5 levels + 2 device = 8.5 of its 10 ms: 1.5 other
    assert eager["other_ms"] == pytest.approx(1.5) and eager["status"] == "ok" and eager["message"] is None
    assert d["libtorch"]["python_ms"] == 0 and d["libtorch"]["dispatch_ms"] == pytest.approx(1.5)
    assert cudnn["dispatch_ms"] == 0 and cudnn["launch_ms"] == pytest.approx(1.5)
    assert graphs["launch_ms"] == 0 and graphs["other_ms"] == pytest.approx(3.5 - 0.5 - 1.9)
    assert d["compiled"]["fusion_ms"] == pytest.approx(0.6) and eager["fusion_ms"] is None
    # every row's parts sum to its timed call
    for r in d.values():
        parts = r["transfer_ms"] + r["python_ms"] + r["dispatch_ms"] + r["launch_ms"] + r["device_ms"] + r["other_ms"]
        assert parts == pytest.approx(r["time_ms"])
    assert eager["bound"] == "host" and eager["host_issue_ms"] == pytest.approx(8.0)


def test_a_device_bound_cell_and_a_pair_that_runs_the_wrong_way():
    times = {**TIMES, "cudnn-graphs": 5.2}  # graphs slower than cudnn: no measurable launch cost
    d = _by_impl(decomposition.decomposition_rows(_sweep(times), _profile(idle=0.5)))
    assert d["eager"]["launch_ms"] == 0 and d["cudnn"]["launch_ms"] == 0
    assert d["eager"]["bound"] == "device"  # idle 0.5 of 10 ms


def test_a_call_whose_host_issues_longer_than_the_device_works_is_host_bound_though_the_device_idles_little():
    # eager at batch 8, 64 px, uint8-pinned, on an H100 (R1): issue 3.87 ms, wall 4.10, device busy 2.42, idle 41%
    profile = _profile().with_columns(
        host_issue_ms=pl.when(pl.col("implementation") == "eager").then(3.87).otherwise(pl.col("host_issue_ms")),
        wall_ms=pl.when(pl.col("implementation") == "eager").then(4.10).otherwise(pl.col("wall_ms")),
        device_idle_ms=pl.when(pl.col("implementation") == "eager").then(1.68).otherwise(pl.col("device_idle_ms")))
    assert _by_impl(decomposition.decomposition_rows(_sweep(), profile))["eager"]["bound"] == "host"
    quick_host = profile.with_columns(host_issue_ms=pl.when(pl.col("implementation") == "eager").then(2.0)
                                      .otherwise(pl.col("host_issue_ms")))
    assert _by_impl(decomposition.decomposition_rows(_sweep(), quick_host))["eager"]["bound"] == "device"


def test_without_device_times_or_a_pair_the_rows_are_partial_and_say_why():
    times = {k: v for k, v in TIMES.items() if k != "cudnn-graphs"}
    device = {k: None for k in times}
    d = _by_impl(decomposition.decomposition_rows(_sweep(times), _profile(device)))
    eager = d["eager"]
    assert eager["status"] == "partial" and eager["device_ms"] is None and eager["other_ms"] is None
    assert eager["launch_ms"] is None and eager["python_ms"] == pytest.approx(3.0) and eager["bound"] is None
    assert "no CUDA device" in eager["message"] and "launch: no ok cudnn-graphs row at this cell" in eager["message"]
    # no profile table at all (the serial protocol)
    none = decomposition.decomposition_rows(_sweep(), tables.frame("sweep_profile", []))
    assert set(none["status"]) == {"partial"} and set(none["message"]) == {"no profiled pass for this cell"}


def _backends(times=TIMES, numerics="fp32", batch=32, resolution=224):
    """backend_comparison rows (time per sample) and backend_eval rows (two calls each, their H2D copies)."""
    comp = [{"implementation": i, "numerics": numerics, "batch_size": batch, "resolution": resolution,
             "status": "ok", "time_per_sample_ms": t / batch, "run_id": "b1"} for i, t in times.items()]
    evals = [{"implementation": i, "numerics": numerics, "batch_size": batch, "resolution": resolution,
              "status": "ok", "transfer": "uint8-pinned", "h2d_ms": h, "time_ms": t, "run_id": "b1"}
             for i, t in times.items() for h in (0.4, 0.6)]
    return (tables.frame("backend_comparison", [{**dict.fromkeys(tables.schema("backend_comparison")), **r}
                                                for r in comp]),
            tables.frame("backend_eval", [{**dict.fromkeys(tables.schema("backend_eval")), **r} for r in evals]))


def _backend_profile(device=DEVICE, numerics="fp32") -> pl.DataFrame:
    p = _profile(device).with_columns(numerics=pl.lit(numerics), transfer=pl.lit("uint8-pinned")).drop("cell")
    return tables.frame("backend_profile", p.to_dicts())


def test_the_backend_comparisons_cell_is_decomposed_beside_the_sweep_as_its_own_experiment():
    comparison, evals = _backends()
    tf32, tf32_evals = _backends({k: v * 0.5 for k, v in TIMES.items()}, "tf32")
    profile = pl.concat([_backend_profile(), _backend_profile({k: None for k in DEVICE}, "tf32")])
    d = decomposition.decomposition_rows(_sweep(), _profile(), pl.concat([comparison, tf32]),
                                         pl.concat([evals, tf32_evals]), profile)
    assert d.filter(pl.col("experiment") == "sweep").height == len(TIMES)
    rows = d.filter(pl.col("experiment") == "backend_comparison")
    assert rows.height == 2 * len(TIMES) and set(rows["cell"]) == {0} and set(rows["transfer"]) == {"uint8-pinned"}
    by = {(r["numerics"], r["implementation"]): r for r in rows.iter_rows(named=True)}
    eager = by[("fp32", "eager")]
    # time = per-sample median × batch; transfer = the median of the timed calls' copies (0.4, 0.6)
    assert eager["time_ms"] == pytest.approx(10.0) and eager["transfer_ms"] == pytest.approx(0.5)
    assert eager["python_ms"] == pytest.approx(3.0) and eager["launch_ms"] == pytest.approx(1.5)
    assert eager["device_ms"] == pytest.approx(2.0) and eager["other_ms"] == pytest.approx(1.5)
    assert eager["status"] == "ok" and eager["run_id"] == "b1" and eager["batch_size"] == 32
    # pairs are taken within the comparison's own numerics: tf32's halved times halve its levels
    t = by[("tf32", "eager")]
    assert t["python_ms"] == pytest.approx(1.5) and t["status"] == "partial"
    assert t["device_ms"] is None and "no CUDA device" in t["message"]
    # a failed implementation in the comparison is no row, and the levels it paired are null, saying so
    failed = comparison.with_columns(status=pl.when(pl.col("implementation") == "cudnn-graphs")
                                     .then(pl.lit("error")).otherwise(pl.col("status")))
    d = decomposition.decomposition_rows(_sweep(), _profile(), failed, evals, _backend_profile())
    eager = _by_impl(d.filter(pl.col("experiment") == "backend_comparison"))["eager"]
    assert eager["launch_ms"] is None and "launch: no ok cudnn-graphs row" in eager["message"]
    # no profiled pass (profile_calls: 0, or the serial protocol): partial rows saying so
    none = decomposition.decomposition_rows(_sweep(), _profile(), comparison, evals, None)
    assert set(none.filter(pl.col("experiment") == "backend_comparison")["message"]) == {
        "no profiled pass for this cell"}


def test_the_report_shows_the_backend_comparisons_cell_and_keeps_it_out_of_the_sweeps_figure():
    from abstraction_cost.report import decomposition as dc
    comparison, evals = _backends()
    d = decomposition.decomposition_rows(pl.concat([_sweep(), _sweep(LARGE, 1, 32, 256)]),
                                         pl.concat([_profile(), _profile(LARGE_DEVICE, cell=1, idle=0.1)]),
                                         comparison, evals, _backend_profile())
    assert set(dc.extreme_cells(d)["batch_size"]) == {8, 32} and dc.display(d).height == 2 * len(TIMES)
    assert set(dc.extreme_cells(d)["resolution"]) == {64, 256}   # the comparison's 224 px cell is not the sweep's
    shown = dc.backend_display(d)
    assert shown.height == len(TIMES) and set(shown["resolution"]) == {224}
    text = dc.backend_finding(d)
    assert text.startswith("The backend comparison's cell, per call: fp32 at batch 32, 224 px: cudnn-graphs 3.50 ms")
    assert "eager 10.00 ms (host levels 6.00, device work 2.00)" in text
    empty = pl.DataFrame(schema=tables.schema("decomposition"))
    assert dc.backend_display(empty).is_empty()
    assert dc.backend_finding(empty) == ("The backend comparison's cell was not decomposed (no ok backend_comparison "
                                         "rows).")


def test_the_backend_finding_names_the_implementations_without_device_work_and_why():
    from abstraction_cost.report import decomposition as dc
    comparison, evals = _backends()
    # cudnn's program without its CUPTI profiler (the H100 run R1): the others profiled
    device = {k: (None if k.startswith("cudnn") else v) for k, v in DEVICE.items()}
    reason = "C++ program: no CUPTI activity subscriber is linked in (its kernels: sweep_kernels); device columns null"
    profile = _backend_profile(device).with_columns(
        device_message=pl.when(pl.col("implementation").str.starts_with("cudnn")).then(pl.lit(reason))
        .otherwise(pl.col("device_message")))
    text = dc.backend_finding(decomposition.decomposition_rows(_sweep(), _profile(), comparison, evals, profile))
    assert "cudnn 5.00 ms (host levels 1.50, device work not profiled)" in text
    assert "eager 10.00 ms (host levels 6.00, device work 2.00)" in text
    assert text.endswith(f" No device work for cudnn, cudnn-graphs: {reason}.")   # once, though it holds a ';'
    whole = dc.backend_finding(decomposition.decomposition_rows(_sweep(), _profile(), comparison, evals,
                                                                _backend_profile()))
    assert "No device work" not in whole


def test_the_stacked_form_has_each_implementations_components():
    long = decomposition.stacked(decomposition.decomposition_rows(_sweep(), _profile()))
    eager = long.filter(pl.col("implementation") == "eager")
    assert set(eager["component"]) == {"transfer", "python", "dispatch", "launch", "device work", "other"}
    assert eager["ms"].sum() == pytest.approx(10.0)


# ------------------------------------------------------------------------------------------------ roofline
def _flops() -> pl.DataFrame:
    return tables.frame("flops", [
        {"run_id": "f", "study": "study_a", "model": "resnet50", "batch_size": 8, "resolution": 64,
         "flops": 8 * 10**9, "flops_per_sample": 10**9, "status": "ok", "message": None},
        {"run_id": "f", "study": "study_b", "model": "convnext", "batch_size": 4, "resolution": 224,
         "flops": None, "flops_per_sample": None, "status": "error", "message": "torch could not count this forward"}])


def _matmul(ms: float | None = 1.0) -> pl.DataFrame:
    if ms is None:
        return tables.frame("study_b_matmul_speedups", [])
    row = {"n": 1000, "dtype": "float32", "pair": "gpu", "mode": "default", "eager_configuration": "cuda",
           "compiled_configuration": "triton", "status": "ok", "eager_median_ms": ms * 2, "compiled_median_ms": ms,
           "run_id": "m"}
    return tables.frame("study_b_matmul_speedups",
                        [{**dict.fromkeys(tables.schema("study_b_matmul_speedups")), **row}])


def _vision() -> pl.DataFrame:
    row = {"model": "convnext", "pair": "gpu", "variant": "compiled", "batch_size": 4, "resolution": 224,
           "numerics": "fp32", "status": "ok", "time_ms": 5.0, "eager_ms": 8.0, "run_id": "v"}
    return tables.frame("vision_speedups", [{**dict.fromkeys(tables.schema("vision_speedups")), **row}])


def test_achieved_tflops_are_set_against_the_runs_best_matmul_in_its_numerics():
    df = roofline.roofline_rows(_flops(), _sweep(), _profile(), _vision(), _matmul(1.0), "fp32")
    a = _by_impl(df.filter(pl.col("study") == "study_a"))
    # peak: 2·1000³ FLOPs in the compiled 1 ms = 2 TFLOP/s; eager's 8 GFLOP in 10 ms = 0.8 TFLOP/s
    assert a["eager"]["peak_tflops"] == pytest.approx(2.0) and a["eager"]["achieved_tflops"] == pytest.approx(0.8)
    assert a["eager"]["fraction_of_peak"] == pytest.approx(0.4) and a["eager"]["device_tflops"] == pytest.approx(4.0)
    assert a["eager"]["peak_of"] == "matmul n=1000 float32 triton"
    assert a["eager"]["run_id"] == "f,m,r1"  # the sweep's, the FLOP count's and the matmul's rows
    best = roofline.best_fraction(df)
    assert best["implementation"] == "cudnn-graphs" and best["fraction_of_peak"] == pytest.approx(8 / 3.5 / 2)
    b = df.filter(pl.col("study") == "study_b")
    assert b.height == 2 and set(b["status"]) == {"missing"}
    assert b["message"][0] == "torch could not count this forward"


def test_without_a_matmul_peak_or_in_another_numerics_there_is_no_fraction_and_the_row_says_why():
    none = roofline.roofline_rows(_flops(), _sweep(), _profile(), _vision(), _matmul(None), "fp32")
    a = none.filter(pl.col("study") == "study_a")
    assert a["fraction_of_peak"].null_count() == a.height and set(a["message"]) == {roofline.NO_PEAK}
    assert roofline.best_fraction(none) is None
    other = roofline.roofline_rows(_flops(), _sweep(), _profile(), _vision(), _matmul(1.0), "tf32")
    assert set(other.filter(pl.col("study") == "study_a")["message"]) == {
        "the matmul study measured tf32 only; no peak for fp32"}


# ------------------------------------------------------------------------------------------------ report
def _two_cells(large_times: dict, large_device: dict) -> pl.DataFrame:
    sweep = pl.concat([_sweep(), _sweep(large_times, cell=1, batch=32, resolution=256)])
    profile = pl.concat([_profile(), _profile(large_device, cell=1, idle=0.1)])
    return decomposition.decomposition_rows(sweep, profile)


LARGE = {k: v * 10 for k, v in TIMES.items()}
LARGE_DEVICE = {k: v * 10 - 1 for k, v in TIMES.items()}


def _speedups(low: float, high: float) -> pl.DataFrame:
    row = {"numerics": "fp32", "implementation": "cudnn-graphs", "cell": 0, "speedup": (low + high) / 2,
           "speedup_low": low, "speedup_high": high, "run_id": "r1"}
    return tables.frame("sweep_speedups", [{**dict.fromkeys(tables.schema("sweep_speedups")), **row}])


def test_the_central_verdict_holds_where_host_levels_make_eagers_gap_and_shrink_with_the_cell():
    from abstraction_cost.report import decomposition as dc, verdicts
    # large cell: the pairs' differences scale with time, but eager's host share falls as device work takes over
    large = {**LARGE, "eager": 40.0, "torchscript-cpp": 38.0, "libtorch": 37.5, "cudnn": 37.0, "cudnn-graphs": 36.8}
    d = _two_cells(large, {k: 30.0 for k in TIMES})
    verdict, text = dc.central_verdict(d, _speedups(2.5, 3.2))
    assert verdict == verdicts.HOLDS, text
    assert "at batch 8, 64 px eager takes 10.00 ms, 6.50 ms more than cudnn-graphs" in text
    assert "6.00 ms (3.00 + 1.50 + 1.50), 60% of its call" in text
    # the fixture's eager issues 8 ms of host work for 2 ms of device work
    assert "device work 2.00 ms (host-bound: its host takes longer to issue the call than the device to run it)" \
        in text and text.startswith("The study's central claim") and "fp32, float32-pageable: at batch 8" in text
    # the gap's interval holds 1: no measurable difference
    assert dc.central_verdict(d, _speedups(0.9, 1.2))[0] == verdicts.NO_DIFFERENCE
    # the host share does not shrink with the cell: the claim in these terms does not hold
    d = _two_cells(LARGE, LARGE_DEVICE)
    assert dc.central_verdict(d, _speedups(2.5, 3.2))[0] == verdicts.DOES_NOT_HOLD
    # no profile and no eager: no verdict
    assert dc.central_verdict(d.filter(pl.col("implementation") != "eager"), _speedups(2.5, 3.2))[0] == \
        verdicts.NO_DIFFERENCE


def test_the_report_draws_the_stacked_figure_at_the_smallest_and_largest_cells_and_the_roofline():
    from abstraction_cost.report import decomposition as dc
    d = _two_cells(LARGE, LARGE_DEVICE)
    cells = dc.extreme_cells(d)
    assert set(zip(cells["size"], cells["batch_size"])) == {("smallest", 8), ("largest", 32)}
    assert dc.stacked_figure(d).to_dict()["facet"]["row"]["field"] == "cell_label"
    assert dc.display(d).height == 2 * len(TIMES)
    assert dc.stacked_figure(d.clear()) is None
    # a row without device work (cudnn's program without its profiler) still draws as long as its call
    unprofiled = d.with_columns(device_ms=pl.when(pl.col("implementation") == "cudnn").then(None)
                                .otherwise(pl.col("device_ms")),
                                other_ms=pl.when(pl.col("implementation") == "cudnn").then(None)
                                .otherwise(pl.col("other_ms")))
    drawn = dc.not_profiled(dc.extreme_cells(unprofiled))
    assert set(drawn["implementation"]) == {"cudnn"} and set(drawn["component"]) == {"not profiled"}
    cudnn = dc.extreme_cells(unprofiled).filter(pl.col("implementation") == "cudnn", pl.col("cell") == 0).row(
        0, named=True)
    assert drawn.filter(pl.col("cell") == 0)["ms"][0] == pytest.approx(
        cudnn["time_ms"] - cudnn["transfer_ms"] - cudnn["launch_ms"])
    r = roofline.roofline_rows(_flops(), _sweep(), _profile(), _vision(), _matmul(1.0), "fp32")
    assert dc.roofline_figure(r, "study_a") is not None and dc.roofline_figure(r, "study_b") is None
    assert dc.roofline_finding(r).startswith("Study A's best path reaches 114% of the run's matmul peak")
    assert ", fp32, float32-pageable input" in dc.roofline_finding(r)
    assert dc.caption(d) == ("Per level, smallest and largest cells, float32-pageable input (the study's) "
                             "(results/derived/decomposition.parquet)")
    pinned = d.with_columns(transfer=pl.lit("uint8-pinned"))
    assert dc.caption(pinned).startswith("Per level, smallest and largest cells, uint8-pinned input (")
    # two transfer modes of one cell: the table shows the study's only, never both
    both = pl.concat([d, pinned.with_columns(cell=pl.col("cell") + 2)])
    assert set(dc.extreme_cells(both)["transfer"]) == {"float32-pageable"} and dc.display(both).height == dc.display(
        d).height
    none = roofline.roofline_rows(_flops(), _sweep(), _profile(), _vision(), _matmul(None), "fp32")
    assert dc.roofline_finding(none) == f"No fraction of peak: {roofline.NO_PEAK}."


def test_the_report_says_why_where_nothing_was_decomposed_or_counted():
    from abstraction_cost.report import decomposition as dc, verdicts
    empty_d = pl.DataFrame(schema=tables.schema("decomposition"))
    empty_r = pl.DataFrame(schema=tables.schema("roofline"))
    assert dc.stacked_figure(empty_d) is None and dc.display(empty_d).is_empty()
    assert dc.central_verdict(empty_d, pl.DataFrame(schema=tables.schema("sweep_speedups"))) == (
        verdicts.NO_DIFFERENCE, "Not measured here: no eager row at the smallest and largest cells.")
    assert dc.roofline_figure(empty_r, "study_a") is None
    assert dc.roofline_finding(empty_r) == "No fraction of peak: no roofline rows."
    # a CPU run: no device times, no cudnn-graphs; the verdict says a level is missing
    cpu = decomposition.decomposition_rows(
        pl.concat([_sweep({k: v for k, v in TIMES.items() if not k.startswith("cudnn")}),
                   _sweep({k: v for k, v in LARGE.items() if not k.startswith("cudnn")}, 1, 32, 256)]),
        pl.DataFrame(schema=tables.schema("sweep_profile")))
    verdict, text = dc.central_verdict(cpu, pl.DataFrame(schema=tables.schema("sweep_speedups")))
    assert verdict == verdicts.NO_DIFFERENCE and "a level is missing" in text


def test_a_programs_trace_gives_its_device_columns_and_is_deleted(tmp_path):
    trace = tmp_path / "ac-profile-1-0.json"
    trace.write_text('{"traceEvents": [{"cat": "kernel", "name": "k", "ts": 0, "dur": 300}, '
                     '{"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "dur": 4}]}')
    record = {"kind": "profile", "cell": 0, "status": "ok", "profiled_calls": 1, "host_issue_ms": 0.2,
              "wall_ms": 0.5, "trace_file": str(trace), "cuda": True}
    out = profiled.with_trace(dict(record))
    assert out["device_ms"] == pytest.approx(0.3) and out["launch_calls"] == 1 and out["device_idle_ms"] == \
        pytest.approx(0.2)
    assert out["device_source"] == "LibTorch profiler (Kineto/CUPTI)" and not trace.exists()
    assert "trace_file" not in out and "cuda" not in out
    gone = profiled.with_trace(dict(record))  # the file is gone: null device columns with the reason
    assert gone["device_ms"] is None and "could not be read: FileNotFoundError" in gone["device_message"]
    no_trace = {"kind": "profile", "cell": 0, "device_ms": None, "device_message": "why"}
    assert profiled.with_trace(dict(no_trace)) == no_trace
