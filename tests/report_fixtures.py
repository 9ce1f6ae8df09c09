"""Small tables in the pipeline's schemas for the report's tests: no pipeline run needed."""
from __future__ import annotations

import itertools
from pathlib import Path

import polars as pl

from abstraction_cost import tables

NOT_RUN_MESSAGE = "no CUDA GPU on this machine and study_a.training.require_gpu is true"


def training_rows(backends=("eager", "libtorch"), datasets=("digits", "synthetic-cifar10"),
                  inits=("kaiming-normal-fan-out",), repeats=2, epochs=3, not_run_backend="cudnn") -> pl.DataFrame:
    """Rows of table training: accuracy rising with epoch and repeat, train epochs of 2 s (eager) / 1 s (others);
    plus one not_run row per dataset for not_run_backend."""
    defaults = dict.fromkeys(tables.schema("training"))
    rows = []
    for backend, dataset, init, repeat in itertools.product(backends, datasets, inits, range(repeats)):
        run_id = f"{backend}-{dataset}-{init}-{repeat}"
        for epoch, phase in itertools.product(range(epochs), ("train", "eval")):
            time_s = (2.0 if backend == "eager" else 1.0) if phase == "train" else 0.5
            rows.append({**defaults, "run_id": run_id, "backend": backend, "dataset": dataset, "init": init,
                         "repeat": repeat, "seed": repeat, "epoch": epoch, "phase": phase, "device": "cuda",
                         "batch_size": 64, "status": "ok", "loss": 1.0 / (epoch + 1),
                         "accuracy": 0.5 + 0.1 * epoch + 0.01 * repeat, "samples": 100, "time_s": time_s,
                         "time_per_sample_ms": 10.0 * time_s * (1 + epoch), "wall_s": time_s + 0.1,
                         "mem_used_mib_max": 1000.0 + 100 * epoch, "alloc_peak_mib": 500.0 + repeat,
                         "gpu_util_mean_pct": 90.0 if phase == "train" else 50.0, "gpu_util_max_pct": 100.0,
                         "nvml_samples": 10})
    if not_run_backend:
        for dataset in datasets:
            rows.append({**defaults, "run_id": f"{not_run_backend}-{dataset}", "backend": not_run_backend,
                         "dataset": dataset, "init": inits[0], "repeat": 0, "seed": 0, "device": "cpu",
                         "batch_size": 64, "status": "not_run", "message": NOT_RUN_MESSAGE})
    return tables.frame("training", rows)


def environment_rows(run_ids, gpu_name="NVIDIA H100 80GB HBM3") -> pl.DataFrame:
    """One environment row per run_id, all on one GPU, clocks drifting between jobs."""
    defaults = dict.fromkeys(tables.schema("environment"))
    rows = [{**defaults, "run_id": run_id, "rule": "train_eager", "job": f"run={run_id}",
             "started_at": f"2026-01-01T00:{i:02d}:00+00:00", "hostname": "gpu-host", "device": "cuda",
             "gpu_name": gpu_name, "gpu_memory_total_mib": 81559.0, "driver_version": "570.124.06",
             "cuda_version": "12.8", "cudnn_version": "91002", "torch_version": "2.11.0",
             "torchvision_version": "0.26.0", "triton_version": "3.5.0", "python_version": "3.12.3",
             "cpu_model": "Some CPU", "cpu_count": 16, "tf32_matmul": False, "tf32_cudnn": False,
             "cudnn_benchmark": False, "git_revision": "0123456789abcdef0123", "git_dirty": False,
             "config_hash": "abcdef012345", "nvml_status": "ok", "sm_clock_mhz_before": 1980.0 - i,
             "sm_clock_mhz_after": 1755.0, "mem_clock_mhz_before": 2619.0, "mem_clock_mhz_after": 2619.0,
             "temperature_c_before": 35.0, "temperature_c_after": 60.0 + i, "power_w_before": 70.0,
             "power_w_after": 300.0, "throttle_reasons_before": "none", "throttle_reasons_after": "sw_power_cap",
             "resumes": 0}
            for i, run_id in enumerate(run_ids)]
    return tables.frame("environment", rows)


def sweep_rows(eager_factor=(10.0, 4.0), numerics="fp32", scale=1.0, spread=0.02, torchscript_memory=0.8,
           libtorch_memory=1.0) -> pl.DataFrame:
    """eager 10× slower at the small cells, 4× at the large; batch 64 at 256 px oom for every implementation;
    every time × scale, with a 95% interval of ±spread (None: no interval); allocator peaks of 1,000 MiB × the
    implementation's factor, NVML device-wide ones 400 MiB above them."""
    defaults = dict.fromkeys(tables.schema("sweep"))
    memory = {"eager": 1.0, "libtorch": libtorch_memory, "torchscript-cpp": torchscript_memory}
    rows = []
    for impl, transfer, (i, (res, batch)) in itertools.product(
            ("eager", "libtorch", "torchscript-cpp"), ("float32-pageable", "float32-pinned"),
            enumerate(itertools.product((32, 256), (8, 32, 64)))):
        small = res == 32
        base = 0.1 * res / 32 * scale
        ms = base * (eager_factor[0] if small else eager_factor[1]) if impl == "eager" else base
        oom = res == 256 and batch == 64
        interval = {} if oom or spread is None else {"time_per_sample_ms_low": ms * (1 - spread),
                                                      "time_per_sample_ms_high": ms * (1 + spread)}
        rows.append({**defaults, "run_id": f"{impl}-{transfer}-{numerics}", "implementation": impl,
                     "transfer": transfer, "numerics": numerics,
                     "device": "cuda", "dataset": "voc2012", "cell": i, "batch_size": batch, "resolution": res,
                     "status": "oom" if oom else "ok", "message": "CUDA out of memory" if oom else None,
                     "time_per_sample_ms": None if oom else ms, "time_ms": None if oom else ms * batch, **interval,
                     "h2d_bytes": batch * 3 * res * res * 4, "h2d_ms": 2.0 if transfer.endswith("pageable") else 1.0,
                     "alloc_peak_mib": None if oom else 1000.0 * memory[impl],
                     "mem_used_mib_max": None if oom else 1400.0 * memory[impl]})
    return tables.frame("sweep", rows)


def comparison_rows(speedup=2.0, low=1.8, high=2.2, prepare_s=1.6) -> pl.DataFrame:
    """Table backend_comparison: eager 1 ms per sample at batch 32 (32 ms a call); torchscript-python `speedup`×
    faster, built in prepare_s; libtorch 1.1× faster with nothing built."""
    defaults = dict.fromkeys(tables.schema("backend_comparison"))
    common = {**defaults, "run_id": "eval-fp32", "numerics": "fp32", "batch_size": 32, "resolution": 224,
              "repeats": 10, "device": "cuda", "status": "ok"}
    return tables.frame("backend_comparison", [
        {**common, "implementation": "eager", "time_per_sample_ms": 1.0, "time_per_sample_ms_low": 0.98,
         "time_per_sample_ms_high": 1.02, "mem_used_mib_max": 3000.0, "alloc_peak_mib": 1200.0},
        {**common, "implementation": "torchscript-python", "time_per_sample_ms": 1.0 / speedup,
         "time_per_sample_ms_low": 0.98 / speedup, "time_per_sample_ms_high": 1.02 / speedup,
         "speedup_vs_eager": speedup, "speedup_vs_eager_low": low, "speedup_vs_eager_high": high,
         "prepare_s": prepare_s},
        {**common, "implementation": "libtorch", "time_per_sample_ms": 0.9, "time_per_sample_ms_low": 0.88,
         "time_per_sample_ms_high": 0.92, "speedup_vs_eager": 1.1,
         "speedup_vs_eager_low": 1.05, "speedup_vs_eager_high": 1.15}])


def layer_summary_rows() -> pl.DataFrame:
    """Table vision_layer_summary: one model of three blocks, timer method, the programme compiling blocks 1-2."""
    defaults = dict.fromkeys(tables.schema("vision_layer_summary"))
    return tables.frame("vision_layer_summary", [
        {**defaults, "run_id": "vision", "model": "squeezenet1_1", "pair": "gpu", "configuration": "triton",
         "mode": "default", "batch_size": 1, "resolution": 224, "numerics": "fp32", "memory_format": "contiguous",
         "method": "timer", "block": b, "block_name": f"b{b}", "eager_ms": e, "eager_ms_low": e * 0.9,
         "eager_ms_high": e * 1.1, "compiled_ms": c, "compiled_ms_low": c * 0.9, "compiled_ms_high": c * 1.1,
         "dp_compiled": d}
        for b, e, c, d in ((0, 1.0, 2.0, False), (1, 3.0, 1.0, True), (2, 1.0, 1.5, True))])


def conv_speedup_rows(speedups=(1.2, 0.9, 1.1, 1.0, 0.8, 1.3)) -> pl.DataFrame:
    """Table study_b_resnet50_conv_speedups: distinct convolutions with isolated speedups, in-model missing."""
    defaults = dict.fromkeys(tables.schema("study_b_resnet50_conv_speedups"))
    return tables.frame("study_b_resnet50_conv_speedups", [
        {**defaults, "run_id": "convs", "conv_id": f"c{i}", "in_channels": 64 * (1 + i % 3),
         "out_channels": 64 * (1 + i % 2), "kernel": 1 + 2 * (i % 2), "stride": 1, "padding": i % 2,
         "input_size": 56 // (1 + i % 2), "batch": 1, "pair": "gpu", "mode": "default", "isolated_status": "ok",
         "isolated_speedup": s, "in_model_status": "missing"} for i, s in enumerate(speedups)])


def derived_report_tables(out: Path) -> dict[str, Path]:
    """The sweep, the backend comparison and the derived tables computed from them (as the rules would), written
    under out; their run_ids' environment rows are the caller's to add (see report_run_ids)."""
    from abstraction_cost.derived import breakeven, decomposition, energy, oracle_curve, precision, predictor

    sweep = sweep_rows().with_columns(power_w_mean=pl.lit(300.0), nvml_samples=pl.lit(5),
                                      gpu_util_mean_pct=pl.col("resolution").cast(pl.Float64) / 4,
                                      repeats=pl.lit(10), warmup_calls=pl.lit(2))
    comparison = comparison_rows()
    frames = {"sweep": sweep, "backend_comparison": comparison}
    predicted, predictor_summary = predictor.predictor_rows(conv_speedup_rows())
    made = {**frames,
            "energy": energy.energy_rows(sweep, comparison, pl.DataFrame(schema=tables.schema("backend_eval"))),
            "compile_breakeven": breakeven.breakeven_rows(frames),
            "precision": precision.precision_rows(frames),
            "vision_oracle_curve": oracle_curve.oracle_curve_rows(layer_summary_rows()),
            "conv_predictor": predicted, "conv_predictor_summary": predictor_summary,
            "decomposition": decomposition.decomposition_rows(sweep, pl.DataFrame(schema=tables.schema("sweep_profile")))}
    paths = {}
    for name, df in made.items():
        paths[name] = out / f"{name}.parquet"
        tables.write(name, df, paths[name])
    return paths


def report_run_ids(paths: dict[str, Path]) -> set[str]:
    """Every run_id of the tables written, for their environment rows."""
    return {i for path in paths.values() for cell in pl.read_parquet(path)["run_id"].to_list()
            for i in cell.split(",")}
