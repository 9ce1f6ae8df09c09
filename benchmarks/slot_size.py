"""Is a timing job slower on a smaller GPU slot? One timing job of the pipeline, alone on the box, rerun with
`gpus.slots` set to each of several values (measure/affinity.py gives each GPU slot 1/slots of the timing cores:
on 32 vCPUs 16 for one slot, 8 for two), interleaved over rounds so that the host's slow moments fall on both sizes.

On two GPUs gpu-smoke's timing jobs took 18-21% longer than on one, in their imports, warm cache loads and worker
start-ups, not their timed calls (docs/results/2026-11-28-h200x2-gpu-smoke-model-warm-ups.md); this separates
the slot's size from everything else a two-GPU run does at once (the other GPU's job, builds beside). Only the
first slot is used: the other GPUs stay idle.

Snakemake first makes the target's inputs (its warm-up, weights), then reruns the target alone (--forcerun) once
per size and round, with an overlay config of `gpus.slots`. Recorded per run: Snakemake's wall time (its start
included, alike for every size), the slot's cores and the phases the job's log times (PHASES), and where the
target is the job's environment table, what its rows say (torch's threads, the workers' start-up and loading).

    python benchmarks/slot_size.py --out slot_size.json      # gpu-smoke's squeezenet1_1 vision job, 1 and 2 slots
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]  # no console script where wheels went in by `pip --target`
TARGET = "results/study_b/models/jobs/gpu/squeezenet1_1/environment.parquet"
JOB_LOG = "logs/study_b/models/gpu-squeezenet1_1.log"
# Phases a timing job's log times, by the lines its steps write (vision jobs: study_b/models; the sweep's and the
# comparison's conductors: "workers up in"); each a list, in the log's order
PHASES = {
    "imports_cpu_s": r"imported in ([0-9.]+) s of CPU",
    "warm_compiles_s": r"compiled one by one in ([0-9.]+) s",
    "layer_times_s": r"layer times done in ([0-9.]+) s",
    "workers_prepared_s": r"workers up and prepared in ([0-9.]+) s",
    "workers_up_s": r"workers up in ([0-9.]+) s",
    "invocations_s": r"interleaved over invocations done in ([0-9.]+) s",
}
SLOT = r"CPU affinity: timing slot \d+: (\S+)"


def phases(log: str) -> dict:
    """The slot's cores and each phase's times from one job's log (a phase it does not log is left out)."""
    found = {name: [float(v) for v in re.findall(pattern, log)] for name, pattern in PHASES.items()}
    slot = re.findall(SLOT, log)
    return {"slot_cores": slot[-1] if slot else None, **{k: v for k, v in found.items() if v}}


ROW_COLUMNS = ("torch_threads", "worker_start_s", "worker_load_s", "cpu_affinity")


def from_rows(target: Path) -> dict:
    """Where the target is the job's environment table: what its rows say of the run (torch's threads, its
    workers' start-up and loading, summed over its measured runs; its cores)."""
    if target.suffix != ".parquet" or not target.exists():
        return {}
    import polars as pl
    rows = pl.read_parquet(target)
    out = {}
    for column in (c for c in ROW_COLUMNS if c in rows.columns):
        values = rows[column].drop_nulls()
        if values.len():
            out[column] = values.sum() if column.endswith("_s") else values[0]
    return out


def order(sizes: list[int], rounds: int) -> list[int]:
    """The runs' gpus.slots, interleaved; each round reversed against the last, so no size always goes first."""
    runs = []
    for k in range(rounds):
        runs += sizes if k % 2 == 0 else sizes[::-1]
    return runs


def snakemake(snakefile: Path, workdir: Path, configs: list[Path], *args: str, log: Path) -> tuple[int, float]:
    cmd = [*SNAKEMAKE, "-s", str(snakefile), "-d", str(workdir), "--cores", "all",
           "--rerun-triggers", "mtime", "--configfile", *map(str, configs), *args]
    start = time.perf_counter()
    with log.open("w") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO).returncode
    return rc, time.perf_counter() - start


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--snakefile", default=str(REPO / "Snakefile"))
    p.add_argument("--config", nargs="+", default=[str(REPO / "config" / "gpu-smoke.yaml")],
                   help="config files, merged in order")
    p.add_argument("--target", default=TARGET, help="the timing job's output, relative to --workdir")
    p.add_argument("--log", default=JOB_LOG, help="the timing job's log, relative to --workdir")
    p.add_argument("--slots", nargs="+", type=int, default=[1, 2], help="gpus.slots of each size")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--workdir", default="slot-size")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    from abstraction_cost.measure import gpu_slots   # after argparse: --help needs no package
    found = len(gpu_slots.visible_gpus())
    if found < max(args.slots):
        p.error(f"--slots {max(args.slots)} needs that many GPUs; this box has {found} (NVML)")
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    configs, snakefile = [Path(c).resolve() for c in args.config], Path(args.snakefile).resolve()
    rc, setup_s = snakemake(snakefile, workdir, configs, "--", args.target, log=workdir / "slot-size-setup.log")
    if rc != 0:
        sys.exit(f"making {args.target}'s inputs failed (rc {rc}): see {workdir / 'slot-size-setup.log'}")
    runs = []
    for k, size in enumerate(order(args.slots, args.rounds)):
        overlay = workdir / f"slot-size-{size}.yaml"
        overlay.write_text(yaml.safe_dump({"gpus": {"slots": size}}))
        rc, wall = snakemake(snakefile, workdir, [*configs, overlay], "--forcerun", args.target, "--", args.target,
                             log=workdir / f"slot-size-run{k}.log")
        run = {"run": k, "gpus_slots": size, "returncode": rc, "snakemake_wall_s": round(wall, 2)}
        if rc == 0:   # a failed run's log and rows are the last good run's: not this one's
            job_log = workdir / args.log
            run.update(phases(job_log.read_text() if job_log.exists() else ""), **from_rows(workdir / args.target))
        runs.append(run)
        print(json.dumps(run), flush=True)
    by_size = {size: [r["snakemake_wall_s"] for r in runs if r["gpus_slots"] == size and r["returncode"] == 0]
               for size in args.slots}
    result = {"config": [str(c.relative_to(REPO)) if c.is_relative_to(REPO) else str(c) for c in configs],
              "target": args.target, "cpus": len(os.sched_getaffinity(0)),
              "setup_s": round(setup_s, 1), "runs": runs,
              "median_wall_s": {str(s): statistics.median(w) if w else None for s, w in by_size.items()}}
    Path(args.out).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
