"""How long a process takes to start its CUDA context when others start theirs at the same moment.

A timing job's workers start together (the backend comparison: three invocations of eight implementations, 24
processes), and each starts its own context on the job's GPU. Their start-up, as the conductor logs it ("slowest
Python worker ...: CUDA context"), grew with their number; this separates the context from the rest. Each round
starts `k` fresh interpreters on `--cpus`; each imports torch, waits for a moment common to all of them (so that
their imports do not stagger their contexts), then times its context (torch.cuda.synchronize(), the first CUDA call)
and its first allocation. Rounds go in the order given, so a repeated count (1 at the start and the end) shows the
drift of the host.

    python benchmarks/cuda_contexts.py [--counts 1 8 24 1] [--cpus 0-7] \
        --out benchmarks/results/<date>_<gpu>_cuda_contexts.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from abstraction_cost.measure import affinity   # imports no torch

SETTLE_S = 15.0   # from a round's start to its common moment: 24 interpreters importing torch on 8 CPUs fit in it


def child(at: float) -> None:
    """One process of a round: its context's seconds, printed as a JSON line, from the common moment `at`
    (time.monotonic(), one clock for every process of the machine)."""
    import torch
    late = time.monotonic() - at
    time.sleep(max(0.0, -late))
    started = time.monotonic()
    torch.cuda.synchronize()
    context = time.monotonic()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    print(json.dumps({"context_s": context - started, "first_alloc_s": time.monotonic() - context,
                      "late_s": max(0.0, late)}), flush=True)


def one_round(k: int, cpus: frozenset[int] | None) -> list[dict]:
    at = time.monotonic() + SETTLE_S
    preexec = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    procs = [subprocess.Popen([sys.executable, __file__, "--child", repr(at)], stdout=subprocess.PIPE, text=True,
                              preexec_fn=preexec) for _ in range(k)]
    out = []
    for proc in procs:
        stdout, _ = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"a round of {k}: a process ended with {proc.returncode}")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def summary(records: list[dict]) -> dict:
    contexts = [r["context_s"] for r in records]
    return {"processes": len(records), "context_s_min": min(contexts), "context_s_median": statistics.median(contexts),
            "context_s_max": max(contexts), "first_alloc_s_max": max(r["first_alloc_s"] for r in records),
            "late_s_max": max(r["late_s"] for r in records)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 8, 24, 1])
    parser.add_argument("--cpus", type=affinity.parse_cpu_list,
                        help="the CPUs every process runs on (a timing slot's), as '0-7' or '0,2,4'")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child)
        return
    if args.out is None:
        parser.error("--out is required")
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("cuda_contexts.py measures CUDA contexts: torch sees no CUDA GPU here")
    rounds = []
    for k in args.counts:
        records = one_round(k, args.cpus)
        rounds.append({**summary(records), "records": records})
        print(f"{k:3d} at once: context {rounds[-1]['context_s_min']:.3f}-{rounds[-1]['context_s_max']:.3f} s "
              f"(median {rounds[-1]['context_s_median']:.3f}), late at most {rounds[-1]['late_s_max']:.2f} s")
    args.out.write_text(json.dumps({
        "benchmark": "cuda_contexts", "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "cuda": torch.version.cuda, "cpus": sorted(args.cpus) if args.cpus else None, "settle_s": SETTLE_S,
        "rounds": rounds}, indent=1) + "\n")


if __name__ == "__main__":
    main()
