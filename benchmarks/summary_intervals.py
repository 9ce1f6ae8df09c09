"""What the bootstrap intervals cost a summary job: measure/statistics' hierarchical_interval and paired_speedup
over invocations of calls, each round in a fresh interpreter as a job pays them (its lazy imports included), with
their results, so that two checkouts (--repo) compare on time and on what they compute.

With --results (a pipeline run's results/ folder, its backend_eval table and logits) and --config, each round is
instead rule compare_backends' work: study_a.comparison.compare_numerics of that run, which the report waits for.

    python benchmarks/summary_intervals.py --shapes 3x40 3x200 5x100 --rounds 5 \
        --out benchmarks/results/<date>_cpu_summary_intervals_<variant>.json
    python benchmarks/summary_intervals.py --results <run>/results --config config/gpu-smoke.yaml --repo <checkout> \
        --out compare.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dag_start import git_revision  # noqa: E402   (beside it)

REPO = Path(__file__).resolve().parents[1]

# One round in a fresh interpreter: argv[1] is a JSON job; prints {"seconds": ..., "results": ...}.
ROUND = """
import json, sys, time
job = json.loads(sys.argv[1])
started = time.perf_counter()
if job["results"] is None:
    import numpy as np
    from abstraction_cost.measure import statistics
    rng, results = np.random.default_rng(1), []
    for k, n in job["shapes"]:
        groups = [list(rng.lognormal(0.0, 0.1, n)) for _ in range(k)]
        faster = [[x * 0.9 * (1 + 0.05 * rng.standard_normal()) for x in g] for g in groups]
        i, s = statistics.hierarchical_interval(groups), statistics.paired_speedup(groups, faster)
        results.append({"shape": [k, n], "interval": [i.estimate, i.low, i.high],
                        "speedup": [s.estimate, s.low, s.high]})
else:
    from abstraction_cost import config as config_module, tables
    from abstraction_cost.study_a.comparison import compare
    config = config_module.load(job["config"])
    backends = config["study_a"]["backends"]
    evals = tables.read("backend_eval", f"{job['results']}/study_a/backend_eval.parquet")
    logits = {n: {i: f"{job['results']}/study_a/backends/eval/{n}/{i}.logits.f32" for i in backends["implementations"]}
              for n in backends["numerics"]}
    rows = compare.compare_numerics(evals, logits, backends["logit_tolerance"], config["seed"])
    results = [{k: r.get(k) for k in ("numerics", "implementation", "status", "time_per_sample_ms",
                                      "time_per_sample_ms_low", "time_per_sample_ms_high", "speedup",
                                      "speedup_low", "speedup_high")} for r in rows]
print(json.dumps({"seconds": time.perf_counter() - started, "results": results}))
"""


def one_round(repo: Path, job: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(repo / "src"), os.environ.get("PYTHONPATH"))
                                                       if p)}
    run = subprocess.run([sys.executable, "-c", ROUND, json.dumps(job)], capture_output=True, text=True, env=env,
                         cwd=repo)
    if run.returncode != 0:
        raise SystemExit(f"a round failed (exit {run.returncode}):\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=["3x40", "3x200", "5x100"],
                        help="invocations x calls of each interval")
    parser.add_argument("--results", help="a run's results/ folder: time compare_numerics on it instead")
    parser.add_argument("--config", help="the run's config, with --results")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repo", default=str(REPO), help="the checkout whose src/ is timed")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.results and not args.config:
        parser.error("--results needs --config (the run's config)")
    repo = Path(args.repo).resolve()
    job = {"shapes": [[int(x) for x in s.split("x")] for s in args.shapes],
           "results": str(Path(args.results).resolve()) if args.results else None,
           "config": str(Path(args.config).resolve()) if args.config else None}
    rounds = []
    for r in range(args.rounds):
        rounds.append(one_round(repo, job))
        print(f"round {r}: {rounds[-1]['seconds']:.2f} s", flush=True)
    seconds = [r["seconds"] for r in rounds]
    out = {"repo": str(repo), "git_revision": git_revision(repo), "device": "cpu",
           "cpus": len(os.sched_getaffinity(0)), "job": job, "times_s": seconds,
           "summary": {"median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds),
                       "n": len(seconds)},
           "results": rounds[0]["results"]}
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(json.dumps(out["summary"], indent=2))


if __name__ == "__main__":
    main()
