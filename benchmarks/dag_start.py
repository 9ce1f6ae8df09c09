"""How long Snakemake takes to start and build the pipeline's DAG, as every start pays it (the tests start it a few
hundred times; on a cluster every job step reads the Snakefile again): `snakemake --dry-run` of one config, each
run in a fresh working directory, and whether the process imported torch or torchvision (the workflow builds its
DAG without them: tests/test_rules.py).

    python benchmarks/dag_start.py [--configfile config/smoke.yaml] [--runs 5] [--repo DIR] \
        --out benchmarks/results/<date>_cpu_dag_start_<variant>.json

--repo: the checkout whose Snakefile (and its src/, which the Snakefile puts first on the path) is timed, e.g.
another branch's worktree; the default is this one. Snakemake and torch are this interpreter's either way.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from abstraction_cost import torch_version

REPO = Path(__file__).resolve().parents[1]
IMPORTED_ENV = "DAG_START_IMPORTED"
# `python -c WRAPPER ARGS`: Snakemake with ARGS in this process, and at its exit (Snakemake ends in sys.exit) which
# of torch and torchvision it imported, written to the file $DAG_START_IMPORTED names
WRAPPER = """
import atexit, json, os, runpy, sys
atexit.register(lambda: open(os.environ["DAG_START_IMPORTED"], "w").write(
    json.dumps([m for m in ("torch", "torchvision") if m in sys.modules])))
sys.argv[0] = "snakemake"
runpy.run_module("snakemake", run_name="__main__", alter_sys=True)
"""


def dry_run(repo: Path, configfile: Path) -> tuple[float, list[str]]:
    """Seconds of one dry run in a fresh working directory, and the modules of torch and torchvision it imported."""
    with tempfile.TemporaryDirectory() as tmp:
        workdir, imported = Path(tmp) / "work", Path(tmp) / "imported.json"
        workdir.mkdir()
        command = [sys.executable, "-c", WRAPPER, "-s", str(repo / "Snakefile"), "--cores", "2", "--dry-run",
                   "--configfile", str(configfile), "-d", str(workdir)]
        started = time.perf_counter()
        run = subprocess.run(command, cwd=workdir, capture_output=True, text=True,
                             env={**os.environ, IMPORTED_ENV: str(imported)})
        seconds = time.perf_counter() - started
        if run.returncode != 0 or "This was a dry-run" not in run.stdout + run.stderr:
            raise SystemExit(f"the dry run failed (exit {run.returncode}):\n{(run.stdout + run.stderr)[-3000:]}")
        return seconds, json.loads(imported.read_text())


def git_revision(repo: Path) -> str | None:
    out = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configfile", default=str(REPO / "config/smoke.yaml"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repo", default=str(REPO), help="the checkout whose Snakefile is timed")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    repo, configfile = Path(args.repo).resolve(), Path(args.configfile).resolve()
    times, imported = [], set()
    for r in range(args.runs):
        seconds, found = dry_run(repo, configfile)
        times.append(seconds)
        imported.update(found)
        print(f"run {r}: {seconds:.2f} s, imported {found or 'neither torch nor torchvision'}", flush=True)
    summary = {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "n": len(times)}
    config = str(configfile.relative_to(REPO)) if configfile.is_relative_to(REPO) else str(configfile)
    out = {"config": config, "repo": str(repo), "git_revision": git_revision(repo), "device": "cpu",
           "cpus": len(os.sched_getaffinity(0)), "torch": torch_version.read(), "runs": args.runs,
           "times_s": times, "summary": summary, "torch_imported": bool(imported), "imported": sorted(imported)}
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(json.dumps({**summary, "torch_imported": bool(imported)}, indent=2))


if __name__ == "__main__":
    main()
