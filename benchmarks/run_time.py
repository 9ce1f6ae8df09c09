"""Where a pipeline run's wall time went, per rule, read from Snakemake's own log (one file per run in
`.snakemake/log/`, or what `snakemake` printed): each job's start ("rule NAME:" after a "[date]" line, then its
"jobid: N") and its end ("Finished jobid: N", or "Error in rule NAME:"), to the second.

Per rule: jobs started, finished and failed, the sum and the longest of their wall times. Timing jobs hold a GPU
slot (one at a time per GPU), so their sum is the floor of the run's wall time on one GPU; the rest can overlap.
Several logs (a run interrupted and resumed) add up; each log's job ids are its own. A job still running when its
log ends counts as unfinished.

    python benchmarks/run_time.py $(ls -t .snakemake/log/*.snakemake.log | head -1) --out run_time.json
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path

from abstraction_cost.measure.gpu_slots import is_timing_rule

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
START = re.compile(r"^(?:local)?(?:checkpoint|rule) (\S+):$")
ERROR = re.compile(r"^Error in rule (\S+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\S+)\)$")


@dataclass
class Job:
    rule: str
    start: dt.datetime
    end: dt.datetime | None = None
    failed: bool = False

    @property
    def seconds(self) -> float | None:
        return None if self.end is None else (self.end - self.start).total_seconds()


def jobs_of(lines, log: str = "") -> dict[tuple[str, int], Job]:
    """The jobs one Snakemake log started, by (log, job id), with their ends."""
    jobs: dict[tuple[str, int], Job] = {}
    stamp, pending = None, None  # pending: ("start" | "error", rule) waiting for its jobid line
    for line in lines:
        line = line.rstrip("\n")
        if match := STAMP.match(line):
            stamp = dt.datetime.strptime(match.group(1), "%a %b %d %H:%M:%S %Y")
        elif (match := START.match(line)) and stamp is not None:
            pending = ("start", match.group(1))
        elif match := ERROR.match(line):
            pending = ("error", match.group(1))
        elif (match := JOBID.match(line)) and pending is not None:
            key = (log, int(match.group(1)))
            if pending[0] == "start":
                jobs[key] = Job(pending[1], stamp)
            elif key in jobs:
                jobs[key].end, jobs[key].failed = stamp, True
            pending = None
        elif (match := FINISHED.match(line)) and (log, int(match.group(1))) in jobs:
            jobs[(log, int(match.group(1)))].end = stamp
    return jobs


def summary(jobs: dict[tuple[str, int], Job]) -> dict:
    """Per rule and in all: jobs, finished, failed, the sum and the longest of the finished jobs' seconds."""
    rules: dict[str, dict] = {}
    for job in jobs.values():
        r = rules.setdefault(job.rule, {"rule": job.rule, "timing": is_timing_rule(job.rule), "jobs": 0,
                                        "finished": 0, "failed": 0, "unfinished": 0, "job_s": 0.0, "longest_s": 0.0})
        r["jobs"] += 1
        if job.seconds is None:
            r["unfinished"] += 1
            continue
        r["failed" if job.failed else "finished"] += 1
        r["job_s"] += job.seconds
        r["longest_s"] = max(r["longest_s"], job.seconds)
    starts = [j.start for j in jobs.values()]
    ends = [j.end for j in jobs.values() if j.end is not None]
    return {"rules": sorted(rules.values(), key=lambda r: -r["job_s"]),
            "first_start": min(starts).isoformat() if starts else None,
            "last_end": max(ends).isoformat() if ends else None,
            "timing_job_s": sum(r["job_s"] for r in rules.values() if r["timing"]),
            "all_job_s": sum(r["job_s"] for r in rules.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path, help="Snakemake logs, in the order the runs happened")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    jobs = {}
    for log in args.logs:
        jobs.update(jobs_of(log.read_text(errors="replace").splitlines(), str(log)))
    result = summary(jobs)
    print(f"{'rule':32s} {'timing':>6s} {'jobs':>5s} {'ok':>4s} {'failed':>6s} {'open':>5s} {'job s':>8s} "
          f"{'longest':>8s}")
    for r in result["rules"]:
        print(f"{r['rule']:32s} {'yes' if r['timing'] else '':>6s} {r['jobs']:5d} {r['finished']:4d} "
              f"{r['failed']:6d} {r['unfinished']:5d} {r['job_s']:8.0f} {r['longest_s']:8.0f}")
    print(f"timing jobs {result['timing_job_s']:.0f} s of {result['all_job_s']:.0f} job-seconds; "
          f"first start {result['first_start']}, last end {result['last_end']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
