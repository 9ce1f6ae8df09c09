"""Does probing a timing slot's CPUs before each turn, and taking the fastest, keep a turn's host-bound work off the
VM's slow state? On the GPU VMs a CPU runs at one of two speeds, 2x apart, switching every second or so and
differently per CPU (benchmarks/host_cores.py); measure/affinity.py puts a timing job's turns on one fixed CPU of
its slot, so a host-bound cell's turns meet whichever state that CPU is in, and its median moves between runs.

Turns alternate two arms (ABBA...), each turn the host probe's op (measure/host_speed.py) for about `--turn-ms`, on
the cores of GPU slot 0 of a two-slot split (affinity.plan; every CPU where the machine is too small to split):

    fixed    one CPU for every turn (the slot's last)
    probed   affinity.Turns' candidates (the slot's CPUs but CPU 0) probed for `--probe-ops` ops each, the turn on
             the fastest, as affinity.turns_on_one_cpu does before each of a timing job's turns

and it reports per arm the median, the 90th percentile and the share of turns in the slow state (over 1.5x the
fastest tenth of all turns), the probe's cost per turn, and how well a probe predicts its turn (the turn's time over
the probe's).

    python benchmarks/turn_cpu.py [--seconds 60] --out benchmarks/results/<date>_<gpu>_turn_cpu.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from abstraction_cost.measure import affinity, host_speed

OPS_PER_BLOCK = 200   # a turn's blocks: small, so that --turn-ms sets the turn's length


def turn(blocks: int) -> float:
    return host_speed.op_us(OPS_PER_BLOCK, blocks)


def summary(values: list[float], slow_from: float) -> dict:
    ordered = sorted(values)
    return {"turns": len(values), "median_us": statistics.median(values),
            "p90_us": ordered[int(0.9 * (len(ordered) - 1))],
            "slow_share": sum(v > slow_from for v in values) / len(values)}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--turn-ms", type=float, default=150, help="a turn's length (6 blocks of 50 ms over 2-4 workers)")
    p.add_argument("--probe-ops", type=int, default=affinity.PROBE_OPS)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    everything = sorted(os.sched_getaffinity(0))
    split = affinity.plan(everything, slots=2)
    cores = sorted(split.timing[0]) if split else everything
    fixed, candidates = max(cores), affinity.Turns([], frozenset(cores)).candidates
    blocks = max(1, round(args.turn_ms * 1e3 / (OPS_PER_BLOCK * host_speed.op_us())))
    rows, started, k = [], time.time(), 0
    while time.time() - started < args.seconds:
        for arm in (("fixed", "probed") if k % 2 == 0 else ("probed", "fixed")):   # ABBA
            probe_s, predicted = None, None
            if arm == "probed":
                t0 = time.perf_counter()
                cpu, predicted = affinity.fastest_cpu(candidates, lambda: host_speed.op_us(args.probe_ops, 1))
                probe_s = time.perf_counter() - t0
            else:
                cpu = fixed
            os.sched_setaffinity(0, {cpu})
            rows.append({"pair": k, "arm": arm, "cpu": cpu, "op_us": turn(blocks), "probe_s": probe_s,
                         "probe_us": predicted})
        k += 1
    os.sched_setaffinity(0, set(everything))
    fastest = sorted(r["op_us"] for r in rows)[:max(1, len(rows) // 10)]
    slow_from = 1.5 * statistics.median(fastest)
    probed = [r for r in rows if r["arm"] == "probed"]
    result = {
        "cores": cores, "candidates": candidates, "fixed_cpu": fixed, "turn_blocks": blocks,
        "ops_per_block": OPS_PER_BLOCK,
        "probe_ops": args.probe_ops, "wall_s": time.time() - started, "slow_from_us": slow_from,
        "arms": {arm: summary([r["op_us"] for r in rows if r["arm"] == arm], slow_from)
                 for arm in ("fixed", "probed")},
        "probe_ms_median": statistics.median(r["probe_s"] for r in probed) * 1e3,
        "turn_over_probe_median": statistics.median(r["op_us"] / r["probe_us"] for r in probed),
        "probed_cpus": {c: sum(r["cpu"] == c for r in probed) for c in candidates},
        "rows": rows,
    }
    for arm, s in result["arms"].items():
        print(f"{arm:7s} median {s['median_us']:.2f} us/op, p90 {s['p90_us']:.2f}, slow {s['slow_share']:.0%} "
              f"of {s['turns']} turns")
    print(f"probe {result['probe_ms_median']:.1f} ms per turn over {len(candidates)} CPUs; turn/probe "
          f"{result['turn_over_probe_median']:.2f}; slow from {slow_from:.2f} us/op")
    Path(args.out).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
