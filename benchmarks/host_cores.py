"""Is the host's speed a property of the CPU a process runs on, of the process, or of the moment? Host-bound cells
(eager at batch 1, small sweep cells) differ between fresh processes by up to 2x on a quiet VM; this benchmark
separates three candidate causes, with the host probe's op (measure/host_speed.py: µs per ATen op dispatched from
Python) as the yardstick, on the CPUs this process may use:

    per_cpu       the op's time pinned to each CPU in turn, in three passes (a slow CPU is slow in every pass; a
                  slow moment is slow on every CPU of one pass)
    siblings      the op's time on a CPU while a spinning process holds each other CPU: a hidden hardware-thread
                  sibling (a VM that shows no SMT topology) slows it where the split of measure/affinity.py
                  cannot see it
    processes     fresh interpreters, each pinned to one CPU, each timing the op once: the spread between
                  processes on one CPU is the part no choice of CPU removes

    python benchmarks/host_cores.py --out benchmarks/results/<date>_<gpu>_host_cores.json
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from abstraction_cost.measure import host_speed

# the host probe's op, in more and longer blocks than an environment row's (~0.15-0.3 s per measurement)
OPS = 2000
BLOCKS = 60


def pinned(cpu: int) -> float:
    os.sched_setaffinity(0, {cpu})
    return host_speed.op_us(OPS, BLOCKS)


def _spin(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})
    while True:
        pass


def per_cpu(cpus: list[int], passes: int) -> list[dict]:
    return [{"pass": p, "cpu": c, "op_us": pinned(c)} for p in range(passes) for c in cpus]


def siblings(cpus: list[int], probes: list[int]) -> list[dict]:
    """For each probed CPU: its op time alone, then with a spinner on each other CPU."""
    out = []
    ctx = mp.get_context("fork")
    for c in probes:
        alone = pinned(c)
        for other in cpus:
            if other == c:
                continue
            spinner = ctx.Process(target=_spin, args=(other,), daemon=True)
            spinner.start()
            time.sleep(0.05)
            loaded = pinned(c)
            spinner.terminate()
            spinner.join()
            out.append({"cpu": c, "spinner_cpu": other, "alone_op_us": alone, "op_us": loaded,
                        "slowdown": loaded / alone})
    return out


def processes(cpu: int, count: int) -> list[float]:
    code = (f"import os; os.sched_setaffinity(0, {{{cpu}}}); from abstraction_cost.measure import host_speed; "
            f"print(host_speed.op_us({OPS}, {BLOCKS}))")
    return [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
            for _ in range(count)]


def spread(values: list[float]) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values),
            "max_over_min": max(values) / min(values)}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--probe-cpus", type=int, default=4, help="CPUs whose hidden siblings are looked for")
    p.add_argument("--processes", type=int, default=8, help="fresh interpreters on each of two CPUs")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    cpus = sorted(os.sched_getaffinity(0))
    started = time.time()
    rows = per_cpu(cpus, args.passes)
    by_cpu = {c: [r["op_us"] for r in rows if r["cpu"] == c] for c in cpus}
    by_pass = {k: [r["op_us"] for r in rows if r["pass"] == k] for k in range(args.passes)}
    contention = siblings(cpus, cpus[:args.probe_cpus])
    worst = {c: max((r for r in contention if r["cpu"] == c), key=lambda r: r["slowdown"])
             for c in cpus[:args.probe_cpus]}
    fresh = {c: processes(c, args.processes) for c in (cpus[0], cpus[len(cpus) // 2])}
    os.sched_setaffinity(0, set(cpus))
    result = {
        "cpus": cpus, "wall_s": time.time() - started,
        "per_cpu": rows,
        "cpu_medians": spread([statistics.median(v) for v in by_cpu.values()]),
        "within_cpu_over_passes": {c: spread(v) for c, v in by_cpu.items()},
        "pass_medians": {k: statistics.median(v) for k, v in by_pass.items()},
        "siblings": contention,
        "worst_spinner": {c: {"spinner_cpu": r["spinner_cpu"], "slowdown": r["slowdown"]} for c, r in worst.items()},
        "processes": {c: {"op_us": v, **spread(v)} for c, v in fresh.items()},
    }
    print(f"per CPU (median of passes): {result['cpu_medians']}")
    print(f"per pass: {result['pass_medians']}")
    print(f"worst spinner per probed CPU: {result['worst_spinner']}")
    print("fresh processes: " + "; ".join(f"cpu {c}: {s['min']:.3f}-{s['max']:.3f} µs ({s['max_over_min']:.2f}x)"
                                          for c, s in result["processes"].items()))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
