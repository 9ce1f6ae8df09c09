"""Small tables in the pipeline's schemas for the report's tests: no pipeline run needed."""
from __future__ import annotations

import itertools

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
