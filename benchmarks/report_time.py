"""How long the report takes at the end of a run: rule `report` alone, made again on a finished run's results
(--forcerun report) in fresh Snakemake invocations, for one checkout or several (--repo, interleaved round by round),
as every run pays it after its last table. Per round and checkout: the invocation's wall time (Snakemake's start
and DAG included, the same for every checkout) and the report job's own, from its log's first line (its script
started) to its last (the page written). A checkout with rule `report_bundle` has the charts' JavaScript built
first, as a run builds it at its start.

    python benchmarks/report_time.py --workdir /path/to/a/finished/run --config config/gpu-smoke.yaml \
        --set device=auto --repo . /tmp/before --rounds 5 --out report_time.json
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOG = Path("logs/report/report.log")
BUNDLE = "results/report_bundle.json"


def snakemake(repo: Path, args, target: str, rules: tuple[str, ...]) -> float:
    """One invocation of `repo`'s Snakefile on args.workdir making `target` with only `rules` allowed; its wall."""
    command = [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "-d", str(args.workdir),
               "--cores", "1", "--configfile", str(repo / args.config), "--rerun-triggers", "mtime", "-q",
               "--allowed-rules", *rules, "--forcerun", rules[-1],
               *(["--config", *args.set] if args.set else []), "--", target]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(repo / "src")})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"report_time: {repo}: snakemake failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return wall


def job_seconds(log: Path) -> float:
    """The report job's seconds from its log: first line (its script started) to last (the page written)."""
    stamps = [dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
              for line in log.read_text().splitlines() if line[:4].isdigit()]
    return (stamps[-1] - stamps[0]).total_seconds()


def has_bundle_rule(repo: Path) -> bool:
    return "rule report_bundle:" in (repo / "workflow" / "rules" / "report.smk").read_text()


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, required=True, help="a finished run's working directory (results/)")
    p.add_argument("--config", default="config/gpu-smoke.yaml", help="the run's config, relative to each --repo")
    p.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", help="Snakemake --config overrides")
    p.add_argument("--repo", type=Path, nargs="+", default=[REPO], help="checkouts to compare")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    if not (args.workdir / "results").is_dir():
        raise SystemExit(f"report_time: {args.workdir} has no results/ folder: give a finished run's --workdir")
    repos = [r.resolve() for r in args.repo]
    runs = {str(r): {"invocation_s": [], "job_s": []} for r in repos}
    for repo in repos:
        if has_bundle_rule(repo):   # as a run does at its start: not part of the report's time
            snakemake(repo, args, BUNDLE, ("report_bundle",))
    for _ in range(args.rounds):
        for repo in repos:
            wall = snakemake(repo, args, "results/report.html", ("report",))
            runs[str(repo)]["invocation_s"].append(round(wall, 3))
            runs[str(repo)]["job_s"].append(round(job_seconds(args.workdir / LOG), 3))
    result = {"workdir": str(args.workdir), "config": args.config, "rounds": args.rounds, "runs": runs,
              "median": {r: {k: statistics.median(v) for k, v in m.items()} for r, m in runs.items()}}
    for repo, m in result["median"].items():
        print(f"{repo}: invocation {m['invocation_s']:.2f} s, report job {m['job_s']:.2f} s "
              f"(median of {args.rounds})")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
