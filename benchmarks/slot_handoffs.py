"""How long a GPU slot stands held but idle between two timing jobs, read from a run's job logs (logs/ of its
working directory): each handoff is the time from one job's end on its slot to the next job's take of it, where
the next job was already running (staged: gpu_slots.stage) and so waited for the slot only.

A job's take is its log's "GPU slot: GPU ..." line; its end on the slot is its "GPU slot: GPU n given back" line
(gpu_slots.release), or, in runs made before that call, its last line: the slot was held until its process exited,
a second or two later, so those handoffs include that exit. The logs' stamps are to the millisecond, where
Snakemake's are whole seconds (run_time.py). One slot per run: on a box of several GPUs the lines name each job's
GPU, and handoffs are counted per GPU.

    python benchmarks/slot_handoffs.py <workdir>/logs [more runs' logs ...] [--out handoffs.json]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
TAKE = re.compile(r"GPU slot: GPU (\d+) \(")
GIVEN_BACK = re.compile(r"GPU slot: GPU (\d+) given back")


@dataclass(frozen=True)
class OnSlot:
    log: str
    gpu: int
    started: dt.datetime   # the log's first line
    taken: dt.datetime
    ended: dt.datetime     # given back, or the log's last line
    given_back: bool


def on_slot(path: Path) -> OnSlot | None:
    """A timing job's time on its slot from its log; None for a log with no take."""
    stamped = [(dt.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f"), line)
               for line in path.read_text(errors="replace").splitlines() if (m := STAMP.match(line))]
    take = next(((t, m) for t, line in stamped if (m := TAKE.search(line))), None)
    if take is None:
        return None
    back = next((t for t, line in stamped if GIVEN_BACK.search(line)), None)
    return OnSlot(str(path), int(take[1][1]), stamped[0][0], take[0], back or stamped[-1][0], back is not None)


def handoffs(logs: Path) -> dict:
    """Per run: the handoffs (seconds) between consecutive jobs on each GPU where the next was already running."""
    jobs = sorted((j for p in sorted(logs.rglob("*.log")) if (j := on_slot(p)) is not None), key=lambda j: j.taken)
    gaps = []
    for gpu in sorted({j.gpu for j in jobs}):
        lane = [j for j in jobs if j.gpu == gpu]
        gaps += [round((b.taken - a.ended).total_seconds(), 3) for a, b in zip(lane, lane[1:]) if b.started < a.ended]
    return {"logs": str(logs), "jobs": len(jobs), "given_back": sum(j.given_back for j in jobs),
            "handoffs": len(gaps), "median_s": statistics.median(gaps) if gaps else None,
            "sum_s": round(sum(gaps), 3), "min_s": min(gaps, default=None), "max_s": max(gaps, default=None),
            "handoffs_s": gaps}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path, help="a run's logs/ folder (several: several runs)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    runs = []
    for logs in args.logs:
        if not logs.is_dir():
            parser.error(f"{logs}: not a folder of job logs")
        runs.append(handoffs(logs))
        r = runs[-1]
        median = "n/a" if r["median_s"] is None else f"{r['median_s']:.2f} s"
        print(f"{logs}: {r['jobs']} timing jobs ({r['given_back']} gave their slot back), {r['handoffs']} handoffs, "
              f"median {median}, sum {r['sum_s']:.1f} s")
    if args.out:
        args.out.write_text(json.dumps({"runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
