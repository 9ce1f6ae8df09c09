"""Multi-GPU scaling: the wall time of one whole pipeline run on 1 GPU against N GPUs of one box.

Each run is `snakemake --cores all` of a config (default config/gpu-smoke.yaml; several files merge in order, as
Snakemake's --configfile does) with gpus.slots = --gpus, in a fresh working directory with fresh Inductor and Triton
caches (cold caches: data, compile cache, results). The C++ programs (native/build, shared by every run) are built
before the clock starts, so both runs time the same work; with --native-in-run their build directory is removed
first and they build inside the clock, as a first run does. From the run's environment table it records each timing
job's GPU, start and end, checks that no two timing jobs overlapped on one GPU, counts every table's rows by
status, and records the host's speed in the timing jobs (two runs' wall times compare only beside it).

    python benchmarks/multi_gpu_scaling.py --gpus 1 --out one.json
    python benchmarks/multi_gpu_scaling.py --gpus 2 --out two.json
    python benchmarks/multi_gpu_scaling.py --summarise one.json two.json --out scaling.md
    python benchmarks/multi_gpu_scaling.py --gpus 2 --native-in-run --config config/config.yaml \
        config/overlays/offline.yaml --out default.json     # the default config whole, without network

Snakemake's own log is kept in the working directory (--workdir) for benchmarks/run_time.py's breakdown.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import statistics
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]  # no console script where wheels went in by `pip --target`
TARGET_SPEEDUP = 1.8  # issue 28: two GPUs against one on config/gpu-smoke.yaml
HOST_TOLERANCE = 0.25  # the host's two speeds are 2x apart (docs/measurement.md); within this, one state


def _when(iso: str) -> float:
    return dt.datetime.fromisoformat(iso).timestamp()


def timing_jobs(environment: pl.DataFrame) -> list[dict]:
    """Every measuring job's rule, wildcards, GPU and start and end (epoch seconds), in start order."""
    jobs = [{"rule": r["rule"], "job": r["job"], "device": r["device"], "gpu_index": r["gpu_index"],
             "gpu_uuid": r["gpu_uuid"], "start": _when(r["started_at"]), "end": _when(r["ended_at"])}
            for r in environment.iter_rows(named=True) if r["started_at"] and r["ended_at"]]
    return sorted(jobs, key=lambda j: j["start"])


def overlaps_on_one_gpu(jobs: list[dict]) -> list[tuple[str, str]]:
    """Pairs of timing jobs that ran at the same time on the same GPU (should be none)."""
    found = []
    on_gpu = [j for j in jobs if j["device"] == "cuda"]
    for i, a in enumerate(on_gpu):
        for b in on_gpu[i + 1:]:
            if a["gpu_uuid"] == b["gpu_uuid"] and a["start"] < b["end"] and b["start"] < a["end"]:
                found.append((f"{a['rule']}[{a['job']}]", f"{b['rule']}[{b['job']}]"))
    return found


def host_speed(environment: pl.DataFrame) -> dict[str, float | None]:
    """The host's speed over the run's timing (measure/host_speed.py: µs per dispatched op, GB/s of a pageable
    copy): the median of the timing jobs' probes at start and end, each weighted by half its job's duration, so that
    the long jobs' host counts as long as they ran (a VM's host switches between two speeds: docs/measurement.md);
    and turn_host_op_us, the picked CPUs' probes before the jobs' turns (measure/affinity.Turns), each job's median
    weighted by its whole duration. A run on a slower host is slower in its host-bound work, so two runs' wall times
    compare only beside it."""
    timed = environment.filter(pl.col("started_at").is_not_null() & pl.col("ended_at").is_not_null())
    seconds = [_when(e) - _when(s) for s, e in zip(timed["started_at"], timed["ended_at"])]

    def weighted_median(columns: dict[str, float]) -> float | None:   # column -> the share of a job's duration
        if not all(c in timed.columns for c in columns):
            return None
        pairs = sorted((v, w * share) for c, share in columns.items() for v, w in zip(timed[c], seconds)
                       if v is not None)
        total, seen = sum(w for _, w in pairs), 0.0
        for value, weight in pairs:
            seen += weight
            if seen >= total / 2:
                return round(value, 3)
        return None

    ends = lambda name: {f"{name}_start": 0.5, f"{name}_end": 0.5}  # noqa: E731
    return {"host_op_us": weighted_median(ends("host_op_us")),
            "host_copy_gbps": weighted_median(ends("host_copy_gbps")),
            "turn_host_op_us": weighted_median({"turn_host_op_us": 1.0})}


def row_status(results: Path) -> dict[str, int]:
    """Rows by status over every table under results/ that has a status column."""
    counts: dict[str, int] = {}
    for path in sorted(results.rglob("*.parquet")):
        if (path.name.endswith((".env.parquet", ".rows.parquet")) or "/jobs/" in str(path)
                or path.parent.name == "eval" and path.parent.parent.name == "backends"):
            continue  # parts of whole tables (the backend comparison's per numerics too), counted in the whole
        df = pl.read_parquet(path)
        if "status" in df.columns:
            for status, n in df["status"].value_counts().iter_rows():
                counts[status] = counts.get(status, 0) + n
    return counts


def run(config_paths: list[Path], gpus: int, workdir: Path, cores: str, native_in_run: bool) -> dict:
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    # the slots last: Snakemake merges config files key by key, so gpus.slots joins the files' own gpus settings
    (workdir / "slots.yaml").write_text(yaml.safe_dump({"gpus": {"slots": gpus}}))
    caches = workdir / "caches"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
           "TRITON_CACHE_DIR": str(caches / "triton")}
    base = [*SNAKEMAKE, "--cores", cores, "--configfile", *(str(p.resolve()) for p in config_paths),
            str(workdir / "slots.yaml"), "-s",
            str(REPO / "Snakefile"), "--workflow-profile", str(REPO / "profiles/default"), "-d", str(workdir)]
    if native_in_run:
        shutil.rmtree(REPO / "native/build", ignore_errors=True)
    else:  # the shared C++ build outside the clock (a no-op when native/build is up to date)
        subprocess.run([*base, "build_native"], cwd=REPO, env=env, check=True, capture_output=True)
    started_at, start = time.time(), time.monotonic()
    done = subprocess.run(base, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    (workdir / "snakemake.log").write_text(done.stdout + done.stderr)
    environment = pl.read_parquet(workdir / "results/environment.parquet") if done.returncode == 0 else None
    jobs = timing_jobs(environment) if environment is not None else []
    return {"config": " ".join(map(str, config_paths)), "gpus": gpus, "native_in_run": native_in_run,
            "returncode": done.returncode, "started_at": started_at, "wall_s": round(wall, 1),
            "hostname": os.uname().nodename, "gpu_names": sorted({r for r in (environment["gpu_name"].to_list()
                                                                             if environment is not None else [])
                                                                  if r}),
            "jobs": jobs, "overlaps_on_one_gpu": overlaps_on_one_gpu(jobs),
            "host": host_speed(environment) if environment is not None else {},
            "rows_by_status": row_status(workdir / "results") if done.returncode == 0 else {},
            "log_tail": (done.stdout + done.stderr)[-3000:] if done.returncode else ""}


def packed(run: dict, slot_s: float | None = None) -> float | None:
    """The run's wall time had its GPU timing jobs (slot_s seconds of them in all; by default its own) been packed
    perfectly over its GPUs, with what came before the first and after the last as it was (Snakemake's start,
    data, the first job's imports; summaries and the report): a bound no scheduling of these jobs beats. None for
    a run recorded without its start."""
    on_gpu = [j for j in run["jobs"] if j["device"] == "cuda"]
    if "started_at" not in run or not on_gpu:
        return None
    lead = min(j["start"] for j in on_gpu) - run["started_at"]
    tail = run["started_at"] + run["wall_s"] - max(j["end"] for j in on_gpu)
    return lead + (gpu_slot_s(run) if slot_s is None else slot_s) / run["gpus"] + tail


def gpu_slot_s(run: dict) -> float:
    return sum(j["end"] - j["start"] for j in run["jobs"] if j["device"] == "cuda")


def summarise(runs: list[dict]) -> str:
    """A markdown report: wall time per GPU count, speedup over the fewest GPUs (the median of their runs' walls),
    jobs per GPU, overlaps, rows; per GPU count above, each run's speedup and, where there are several, the
    speedup of their median wall and how many runs met the target."""
    runs = sorted(runs, key=lambda r: r["gpus"])   # stable: runs of one count keep their order
    base = runs[0]
    base_runs = [r for r in runs if r["gpus"] == base["gpus"]]
    base_wall = statistics.median(r["wall_s"] for r in base_runs)
    lines = [f"Config `{base['config']}` on {base['hostname']} ({', '.join(base['gpu_names']) or 'no GPU'}), "
             "cold caches, `snakemake --cores all`"
             f"{', the C++ programs built inside the clock' if base.get('native_in_run') else ''}.", "",
             "| GPUs | wall (s) | speedup | timing jobs per GPU | overlaps on one GPU | rows by status "
             "| host: µs per op, copy GB/s, turns' µs per op |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        per_gpu: dict[str, int] = {}
        for j in r["jobs"]:
            key = "cpu" if j["device"] != "cuda" else f"GPU {j['gpu_index']}"
            per_gpu[key] = per_gpu.get(key, 0) + 1
        status = (", ".join(f"{k} {v}" for k, v in sorted(r["rows_by_status"].items()))
                  or f"run failed ({r['returncode']})")
        host = r.get("host") or {}   # runs recorded before the host's speed was: "-"
        lines.append(f"| {r['gpus']} | {r['wall_s']} | {base_wall / r['wall_s']:.2f} | "
                     f"{', '.join(f'{k}: {v}' for k, v in sorted(per_gpu.items()))} | "
                     f"{len(r['overlaps_on_one_gpu'])} | {status} | "
                     f"{host.get('host_op_us') or '-'}, {host.get('host_copy_gbps') or '-'}, "
                     f"{host.get('turn_host_op_us') or '-'} |")
    more = [r for r in runs if r["gpus"] != base["gpus"]]
    lines += ["", *_verdicts(base, base_wall, len(base_runs), more),
              *(line for r in more for line in _host_caveat(base, r)), *_packing(base, more), "",
              "Timing jobs (start and end relative to the run's first job, seconds):", ""]
    for r in runs:
        t0 = min((j["start"] for j in r["jobs"]), default=0.0)
        lines.append(f"- {r['gpus']} GPU(s): " + "; ".join(
            f"{j['rule']}[{j['job']}] on {'cpu' if j['device'] != 'cuda' else 'GPU ' + str(j['gpu_index'])} "
            f"{j['start'] - t0:.0f}-{j['end'] - t0:.0f}" for j in r["jobs"]))
    return "\n".join(lines) + "\n"


def _verdicts(base: dict, base_wall: float, n_base: int, more: list[dict]) -> list[str]:
    """Per GPU count above the base's: each run's speedup against the base runs' median wall, and with several
    runs the speedup of their median wall and how many met TARGET_SPEEDUP (one run's luck is no verdict)."""
    lines = []
    against = f"{base['gpus']}" + (f" (the median of {n_base} runs, {base_wall:.1f} s)" if n_base > 1 else "")
    for gpus in sorted({r["gpus"] for r in more}):
        walls = [r["wall_s"] for r in more if r["gpus"] == gpus]
        speedups = [base_wall / w for w in walls]
        if len(speedups) == 1:
            s = speedups[0]
            lines.append(f"{gpus} GPUs against {against}: {s:.2f}x "
                         f"({'meets' if s >= TARGET_SPEEDUP else 'misses'} the {TARGET_SPEEDUP}x target).")
            continue
        median = base_wall / statistics.median(walls)
        met = sum(s >= TARGET_SPEEDUP for s in speedups)
        lines.append(f"{gpus} GPUs against {against}: {', '.join(f'{s:.2f}x' for s in speedups)}, median "
                     f"{median:.2f}x ({'meets' if median >= TARGET_SPEEDUP else 'misses'} the {TARGET_SPEEDUP}x "
                     f"target; {met} of {len(speedups)} runs met it).")
    return lines


def _packing(base: dict, runs: list[dict]) -> list[str]:
    """Per run on more GPUs: the bound of perfect packing with its own GPU timing jobs, and with the base run's
    (what the run would take were its jobs as fast as on fewer GPUs)."""
    lines, base_s = [], gpu_slot_s(base)
    for r in runs:
        own, as_base = packed(r), packed(r, base_s)
        if own is None:
            continue
        lines.append(f"Packed perfectly, the {r['gpus']}-GPU run of {r['wall_s']} s would end at {own:.0f} s "
                     f"({base['wall_s'] / own:.2f}x) with its {gpu_slot_s(r):.0f} s of GPU timing jobs, and at "
                     f"{as_base:.0f} s ({base['wall_s'] / as_base:.2f}x) were they the {base['gpus']}-GPU run's "
                     f"{base_s:.0f} s.")
    return lines


def _host_caveat(base: dict, best: dict) -> list[str]:
    """A line where the two runs' hosts differed by more than HOST_TOLERANCE in µs per op: their ratio then
    measures the host too."""
    a, b = ((r.get("host") or {}).get("host_op_us") for r in (base, best))
    if not a or not b or abs(b / a - 1) <= HOST_TOLERANCE:
        return []
    how = f"{b / a:.2f}x as slow" if b > a else f"{a / b:.2f}x as fast"
    return [f"The host was {how} per dispatched op in the {best['gpus']}-GPU run of {best['wall_s']} s ({b} against "
            f"{a} µs): its host-bound work, and so the ratio, measure the host too."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, help="gpus.slots for this run")
    parser.add_argument("--config", type=Path, nargs="+", default=[REPO / "config/gpu-smoke.yaml"],
                        help="config files, merged in order (Snakemake's --configfile)")
    parser.add_argument("--workdir", type=Path, help="fresh working directory (default: a temporary one)")
    parser.add_argument("--cores", default="all")
    parser.add_argument("--native-in-run", action="store_true",
                        help="remove native/build first: the C++ programs build inside the clock")
    parser.add_argument("--summarise", nargs="+", type=Path, metavar="RUN_JSON")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.summarise:
        text = summarise([json.loads(p.read_text()) for p in args.summarise])
    elif args.gpus is not None:
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"scaling-{args.gpus}gpu-"))
        text = json.dumps(run(args.config, args.gpus, workdir, args.cores, args.native_in_run), indent=1)
    else:
        parser.error("give --gpus N for a run, or --summarise RUN_JSON... for the report")
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(args.out)
    print(text if args.summarise else f"wrote {args.out}")


if __name__ == "__main__":
    main()
