"""Sweep overhead: the share of a sweep job's wall time spent outside its timed calls.

Each implementation's job of the config's sweep grid (every cell of resolution × batch × transfer mode, in each
numerics of --numerics, default study_a.sweep.numerics) runs as rule `sweep` runs it (study_a/sweep/serial.run, in a
process of its own, one measured run and table per numerics), on random uint8 images at the grid's resolutions and
freshly initialised weights (time does not depend on either). The parent times each child process from launch to
exit; the timed calls are the cells' median time per batch × repeats, summed over the job's numerics. Everything
else is overhead: interpreter and torch start-up, model load, the C++ program's start, making each cell's input,
warm-up calls, an oom shape's attempt, NVML and table bookkeeping, except a compiled job's builds (each shape's
first call, in the table's build_s: the implementation's own cost, reported apart). Issue 10's target: at most 25%
on an H100 at the default config.

    python benchmarks/sweep_overhead.py --config config/config.yaml --implementations eager libtorch \
        --out sweep_overhead.json

--from-run results/study_a/sweep reads the same from a pipeline run instead: each sweep job's wall time from the
rule's Snakemake benchmark file (jobs/<implementation>.benchmark.tsv) against its tables, for every implementation
the run measured (aoti included, whose package rule package_aoti_sweep builds apart).

--keep DIR keeps every job's sweep rows (and, with --kernels, each implementation's kernel rows from rule
sweep_kernels_job's code) for a look at the tables where the pipeline itself cannot run.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def make_inputs(out: Path, resolutions, pool: int, channels: int = 3) -> None:
    from abstraction_cost.study_a import transfer
    rng = np.random.default_rng(0)
    out.mkdir(parents=True, exist_ok=True)
    for r in resolutions:
        rng.integers(0, 256, size=(pool, channels, r, r), dtype=np.uint8).tofile(out / f"res{r}.u8")
    (out / transfer.MANIFEST).write_text(json.dumps(
        {"channels": channels, "pool": pool, "mean": [0.45] * channels, "std": [0.25] * channels,
         "resolutions": list(resolutions)}))


def child(args) -> None:
    """One sweep job as rule sweep runs it, or (--kernels) one kernel job as rule sweep_kernels_job."""
    from abstraction_cost import config as config_module
    from abstraction_cost.programs import native
    from abstraction_cost.study_a import cudnn
    from abstraction_cost.study_a.sweep import cells as sweep_cells, kernels as sweep_kernels, serial as sweep
    config = config_module.load(args.config)
    config["device"] = args.device or config["device"]
    work = Path(args.workdir)
    inputs = SimpleNamespace(inputs=str(work / "inputs"), weights=str(work / "w.weights"),
                             module=str(work / "model.pt"))
    if sweep_cells.kind(args.implementation)[1] == "cpp":
        inputs.program = str(native.ensure_built("cudnn" if args.implementation in cudnn.IMPLEMENTATIONS
                                                 else "libtorch"))
    stems = [work / f"{args.implementation}-{args.job}-{n}" for n in args.numerics]
    if args.job == "kernels":  # rule sweep_kernels_job: one job per numerics
        for numerics, stem in zip(args.numerics, stems):
            sweep_kernels.run(SimpleNamespace(
                config=config, input=inputs, rule=args.job,
                output=SimpleNamespace(table=f"{stem}.rows.parquet", env=f"{stem}.env.parquet"),
                wildcards=SimpleNamespace(implementation=args.implementation, numerics=numerics)))
        return
    sweep.run(SimpleNamespace(
        config=config, input=inputs, rule=args.job, params=SimpleNamespace(numerics=args.numerics),
        output=SimpleNamespace(tables=[f"{s}.rows.parquet" for s in stems], envs=[f"{s}.env.parquet" for s in stems]),
        wildcards=SimpleNamespace(implementation=args.implementation)))


def job_summary(impl: str, numerics: list[str], df, env, wall: float) -> dict:
    """One job's wall time against its timed calls (median × repeats per ok cell) and its in-job builds."""
    import polars as pl
    ok = df.filter(pl.col("status") == "ok")
    timed = {n: float((part["time_ms"] * part["repeats"]).sum()) / 1000.0
             for n, part in ((n, ok.filter(pl.col("numerics") == n)) for n in numerics)}
    # aoti's build_s is its package's, made by another job; a compiled job's builds are inside its wall time
    build = float(df["build_s"].fill_null(0).sum()) if impl.startswith("compiled-") else 0.0
    return {"implementation": impl, "numerics": numerics, "cells": df.height, "ok_cells": ok.height,
            "wall_s": wall, "timed_s": sum(timed.values()), "timed_s_by_numerics": timed, "build_s": build,
            "outside_timed_pct": 100.0 * (1 - (sum(timed.values()) + build) / wall),
            "prepare_s": float(df["prepare_s"].fill_null(0).sum()), "device": df["device"][0],
            "gpu": env["gpu_name"][0], "torch": env["torch_version"][0]}


def from_run(sweep_dir: Path) -> list[dict]:
    """Every sweep job of a pipeline run: wall time from its Snakemake benchmark file, timed calls from its tables."""
    import polars as pl
    from abstraction_cost import tables
    jobs = []
    for bench in sorted((sweep_dir / "jobs").glob("*.benchmark.tsv")):
        impl = bench.name.removesuffix(".benchmark.tsv")
        paths = sorted((sweep_dir / "jobs").glob(f"*/{impl}.rows.parquet"))
        if not paths:
            raise SystemExit(f"{bench}: no tables jobs/*/{impl}.rows.parquet beside it")
        df = pl.concat([tables.read("sweep", p) for p in paths])
        env = pl.read_parquet(str(paths[0]).replace(".rows.parquet", ".env.parquet"))
        wall = float(pl.read_csv(bench, separator="\t")["s"][0])
        jobs.append(job_summary(impl, list(dict.fromkeys(df["numerics"])), df, env, wall))
    if not jobs:
        raise SystemExit(f"{sweep_dir}/jobs: no *.benchmark.tsv (rule sweep writes one per job)")
    return jobs


def main() -> None:
    from abstraction_cost.study_a.sweep.cells import COMPILE_MODES
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(REPO / "config/config.yaml"))
    p.add_argument("--device", default=None, help="override the config's device (cpu for a dry run)")
    p.add_argument("--implementations", nargs="+", default=["eager", "libtorch"],
                   choices=["eager", "torchscript-python", "torchscript-cpp", "libtorch", "cudnn", "cudnn-graphs",
                            *(f"compiled-{mode}" for mode in COMPILE_MODES)])
    p.add_argument("--numerics", nargs="+", default=None, choices=["fp32", "tf32", "bf16-autocast"],
                   help="each job's numerics, walked in turn (default: the config's study_a.sweep.numerics)")
    p.add_argument("--out", default=None)
    p.add_argument("--keep", default=None, help="copy every job's rows here")
    p.add_argument("--kernels", action="store_true", help="also run each implementation's kernel job")
    p.add_argument("--from-run", default=None, metavar="SWEEP_DIR",
                   help="a pipeline run's sweep directory (results/study_a/sweep) instead of running jobs here")
    p.add_argument("--child", nargs=3, metavar=("IMPLEMENTATION", "JOB", "WORKDIR"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        args.implementation, args.job, args.workdir = args.child
        return child(args)

    jobs = from_run(Path(args.from_run)) if args.from_run else run_jobs(args)
    total_wall = sum(j["wall_s"] for j in jobs)
    total_inside = sum(j["timed_s"] + j["build_s"] for j in jobs)
    result = {"config": None if args.from_run else args.config, "source": args.from_run or "jobs run here",
              "torch": jobs[0]["torch"], "gpu": jobs[0]["gpu"], "jobs": jobs,
              "wall_s": total_wall, "timed_s": sum(j["timed_s"] for j in jobs),
              "build_s": sum(j["build_s"] for j in jobs), "outside_timed_pct": 100.0 * (1 - total_inside / total_wall)}
    if args.from_run:  # the jobs run here were printed as each ended
        for job in jobs:
            print(json.dumps(job))
    print(json.dumps({k: v for k, v in result.items() if k != "jobs"}))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


def run_jobs(args) -> list[dict]:
    """Each implementation's sweep job run here, in a process of its own, on random inputs."""
    import polars as pl

    from abstraction_cost import config as config_module, tables
    from abstraction_cost.study_a import torchscript
    from abstraction_cost.study_a.sweep.cells import SweepSettings
    from abstraction_cost.data.specs import spec
    from abstraction_cost.models import resnet, weights_file
    config = config_module.load(args.config)
    settings = SweepSettings.from_config(config)
    numerics = list(args.numerics or settings.numerics)
    classes = spec(config["study_a"]["backends"]["dataset"], config).classes
    jobs = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        make_inputs(work / "inputs", settings.resolutions, settings.pool)
        weights_file.save(resnet.resnet50(3, classes).state_dict(), work / "w.weights")
        if any(impl.startswith("torchscript") for impl in args.implementations):
            torchscript.save(work / "w.weights", 3, classes, settings.resolutions[0], work / "model.pt",
                             work / "model.json")

        def command(impl, job):
            return [sys.executable, __file__, "--config", args.config, "--numerics", *numerics,
                    "--child", impl, job, tmp] + (["--device", args.device] if args.device else [])
        for impl in args.implementations:
            started = time.perf_counter()
            subprocess.run(command(impl, "sweep"), check=True)
            wall = time.perf_counter() - started
            df = pl.concat([tables.read("sweep", work / f"{impl}-sweep-{n}.rows.parquet") for n in numerics])
            env = pl.read_parquet(work / f"{impl}-sweep-{numerics[0]}.env.parquet")
            jobs.append(job_summary(impl, numerics, df, env, wall))
            print(json.dumps(jobs[-1]), flush=True)
            if args.kernels:
                subprocess.run(command(impl, "kernels"), check=True)
            if args.keep:  # after each implementation, so that a run cut short keeps what it measured
                Path(args.keep).mkdir(parents=True, exist_ok=True)
                for path in work.glob("*.parquet"):
                    shutil.copy(path, Path(args.keep) / path.name)
    return jobs


if __name__ == "__main__":
    main()
