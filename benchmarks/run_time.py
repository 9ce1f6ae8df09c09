"""Where a pipeline run's wall time went, read from Snakemake's own log (one file per run in `.snakemake/log/`, or
what `snakemake` printed) and, with --results, the run's environment rows and tables.

From the log: each job's start ("rule NAME:" after a "[date]" line, then its "jobid: N") and end ("Finished jobid:
N", or "Error in rule NAME:"), to the second, with its input and output files. Per rule: jobs started, finished
and failed, the sum and the longest of their wall times. A timing job's wall time includes, where it started
beside the job timing before it (staged: gpu_slots.stage), its wait for the slot; so with --results each slot also
gives its timing jobs' time on it by rule, whose sum is the floor of the run's wall time on one GPU. Several logs
(a run interrupted and resumed) add up; each log's job ids are its own. A job still running when its log ends counts
as unfinished.

The critical path (the last log's): from the job that ended last, back through the input each job waited for
longest (the one made last by a job of the same log), so what limits the run is read from its first step; each
step's `waited_s` is the time between its last input being made and its start (a GPU slot or cores busy). With
--results a timing step also has `slot_wait_s`, the part of its own time spent waiting for a GPU slot after it
started (staged, gpu_slots.take). `bound` says what held the run: the chain (its path waited less than it ran),
the GPUs' load (it waited more, and every GPU slot was busy at least BUSY_BOUND of the run: a faster run needs
less GPU work, not another order), or places and cores (it waited more while a GPU slot stood idle).

The gate: of the builds that made a timing job's input, the one that ended last (on a GPU box, the AOTInductor
packages the sweep and the backend comparison read), and, with --results, the timing jobs' time on their slots
after its end, split evenly over the GPU slots, against how long after it the last timing job ended: where the two
are close, the schedule after the gate was tight and only an earlier gate or less work after it shortens the run.

Per GPU slot, with --results (the run's results/ folder): the run's span (first start to last end of each log,
added up) is the slot's held time, split into
    measuring    inside the measured runs of the timing jobs on that slot (their environment rows' started_at
                 to ended_at), less the workers' start-ups and loading the rows record (worker_start_s,
                 worker_load_s; for runs recorded before those, the compiled builds the sweep tables record, build_s)
    start_up     from a timing job's start to its first measured run: interpreter, imports, CUDA context; for a
                 job that started staged (its environment rows' gpu_slot_taken_at), from when it took its slot:
                 its imports before that overlapped the job timing on the slot; and inside its measured runs,
                 each invocation's start of fresh workers until the last was up (worker_start_s)
    builds       the workers' loading inside measured runs (models, programs, compiled builds: worker_load_s;
                 loading_s, by rule loading_rules_s), and the time no timing job held the slot while a build or
                 compile job ran (waiting_s: the C++ programs, the compile warm-up, the AOTInductor and
                 TorchScript artifacts)
    other        the rest of the timing jobs' time: between and after their measured runs (checks, writing tables),
                 until each gives its slot back (gpu_slots.release, or its end)
    idle         no timing job on the slot and no build running (data preparation, summaries, the report, waits),
                 split into before the slot's first timing job, between them and after its last (idle_start_s,
                 idle_gaps_s, idle_end_s): the summaries and the report after the last GPU job are every slot's
                 tail, and what one slot's tail has beyond another's is the schedule's imbalance
A slot is a GPU (its UUID in the environment rows), or `cpu` for a run that times on the CPU. measuring_share is
the measuring seconds over the held seconds of every GPU slot together (issue 28's measure of a run; the CPU slot
beside GPUs is left out); measuring_share_of_jobs, over the timing jobs' seconds on those slots (held less waiting and
idle), is the most any schedule of the same jobs could reach. A job's measured runs are found by rule, time and
wildcards: the sweep's shards of one numerics run at once on different GPUs, and each environment row names its
shard, so each slot gets its own shard's runs and its own shard's builds (by run_id). The log's stamps are the
machine's local time, read as this machine's local time: run this where the run ran (or in its time zone).

    python benchmarks/run_time.py $(ls -t .snakemake/log/*.snakemake.log | head -1) --results results \
        --out run_time.json
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from abstraction_cost.measure.gpu_slots import is_timing_rule
from abstraction_cost.measure.statistics import union_length

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
START = re.compile(r"^(?:local)?(?:checkpoint|rule) (\S+):$")
ERROR = re.compile(r"^Error in rule (\S+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
FILES = re.compile(r"^\s+(input|output|wildcards|priority): (.*)$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\S+)\)$")
# Rules that build or compile for the timing jobs, none of them a timing job itself.
BUILD_RULES = ("build_native", "build_native_cudnn", "compile_cache_blocks", "compile_cache_model",
               "compile_cache_sweep", "package_aoti", "package_aoti_sweep", "script_torchscript")
# A sweep job whose build_s is its own in-job compile time (aoti's is its package's, another job's).
IN_JOB_BUILDS = "compiled-"
BUSY_BOUND = 0.9   # a GPU slot busy (not idle) this share of the run left no room for a waiting job
SLOP_S = 1.0   # the log's stamps are whole seconds: a measured run may start up to this before its job's stamp


@dataclass(eq=False)   # a job is itself, a key by identity
class Job:
    rule: str
    start: dt.datetime
    end: dt.datetime | None = None
    failed: bool = False
    jobid: int = -1
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    wildcards: str = ""
    priority: int = 0

    @property
    def seconds(self) -> float | None:
        return None if self.end is None else (self.end - self.start).total_seconds()

    @property
    def name(self) -> str:
        return f"{self.rule}[{self.wildcards}]" if self.wildcards else self.rule


def jobs_of(lines, log: str = "") -> dict[tuple[str, int], Job]:
    """The jobs one Snakemake log started, by (log, job id), with their ends and files."""
    jobs: dict[tuple[str, int], Job] = {}
    stamp, pending = None, None  # pending: [kind ("start" | "error"), rule, fields, key once its jobid is read]
    for line in lines:
        line = line.rstrip("\n")
        if pending is not None and pending[3] is not None and not line.startswith((" ", "\t")):
            _fill(jobs.get(pending[3]), pending[0], pending[2])   # the job's block ended: its fields are read
            pending = None
        if match := STAMP.match(line):
            stamp = dt.datetime.strptime(match.group(1), "%a %b %d %H:%M:%S %Y")
        elif (match := START.match(line)) and stamp is not None:
            pending = ["start", match.group(1), {}, None]
        elif match := ERROR.match(line):
            pending = ["error", match.group(1), {}, None]
        elif (match := FILES.match(line)) and pending is not None:
            pending[2][match.group(1)] = match.group(2)
        elif (match := JOBID.match(line)) and pending is not None:
            key = pending[3] = (log, int(match.group(1)))
            if pending[0] == "start":
                jobs[key] = Job(pending[1], stamp, jobid=key[1])
            elif key in jobs:
                jobs[key].end, jobs[key].failed = stamp, True
        elif (match := FINISHED.match(line)) and (log, int(match.group(1))) in jobs:
            jobs[(log, int(match.group(1)))].end = stamp
    if pending is not None and pending[3] is not None:
        _fill(jobs.get(pending[3]), pending[0], pending[2])
    return jobs


def _fill(job: Job | None, kind: str, fields: dict) -> None:
    if job is None or kind != "start":
        return
    job.inputs = [f.strip() for f in fields.get("input", "").split(",") if f.strip()]
    job.outputs = [f.strip() for f in fields.get("output", "").split(",") if f.strip()]
    job.wildcards = fields.get("wildcards", "").strip()
    job.priority = int(fields.get("priority", "0").strip() or 0)


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


# ------------------------------------------------------------------------------------------ critical path
def inputs_made_by(jobs: list[Job]) -> dict[Job, list[Job]]:
    """Each job's inputs' makers among `jobs` (one Snakemake log's): the DAG's edges as the log shows them."""
    maker = {out: j for j in jobs for out in j.outputs}
    return {j: [maker[f] for f in j.inputs if f in maker and maker[f] is not j] for j in jobs}


def makers(done: dict[tuple[str, int], Job]) -> dict[Job, list[Job]]:
    """Each finished job's inputs' makers, each log's jobs among themselves (job ids are per log)."""
    made: dict[Job, list[Job]] = {}
    for log in {k[0] for k in done}:
        made |= inputs_made_by([j for k, j in done.items() if k[0] == log])
    return made


def critical_path(jobs: dict[tuple[str, int], Job], placed: dict | None = None) -> list[dict]:
    """The chain that ended last, first step first: from the job that ended last, back through the job of the
    same log that made its latest-made input; with the timing jobs' places (on_slots), each timing step's wait for
    its slot."""
    done = {k: j for k, j in jobs.items() if j.end is not None}
    if not done:
        return []
    taken = {j: p.taken for j, p in (placed or {}).items()}
    made = makers(done)
    job = max(done.values(), key=lambda j: (j.end, j.start))
    chain = []
    while job is not None:
        before = max(made[job], key=lambda j: j.end, default=None)
        ready = before.end if before is not None else None
        chain.append({"rule": job.rule, "job": job.name, "jobid": job.jobid, "start": job.start.isoformat(),
                      "end": job.end.isoformat(), "seconds": job.seconds, "timing": is_timing_rule(job.rule),
                      "waited_s": max(0.0, (job.start - ready).total_seconds()) if ready is not None else None,
                      "slot_wait_s": round(taken[job] - _utc(job.start), 1) if job in taken else None})
        job = before
    return chain[::-1]


def gate(jobs: dict[tuple[str, int], Job], placed: dict | None = None) -> dict | None:
    """The last build a timing job read (of the builds that made a timing job's input, the one that ended last), and
    what the timing jobs did from its end on: their time on their slots after it (a staged job's from its take, a
    job that straddles it from then), that time split evenly over the GPU slots they used, and how long after it the
    last one ended. Where that last end follows the gate by about the even split, the gate, not the order, sets the
    wall; None where no timing job read a build."""
    done = {k: j for k, j in jobs.items() if j.end is not None}
    timing = [j for j in done.values() if is_timing_rule(j.rule)]
    made = makers(done)
    read = [m for j in timing for m in made[j] if m.rule in BUILD_RULES]
    if not read:
        return None
    build = max(read, key=lambda j: (j.end, j.start))
    at = _utc(build.end)
    # on the slots only where the places are known (--results): a staged job's log span includes its wait
    after = sum(max(0.0, p.given_back - max(p.taken, at)) for p in placed.values()) if placed else None
    lanes = len({p.slot for p in placed.values() if p.slot != "cpu"}) if placed else 0
    first = min(_utc(j.start) for j in done.values())
    return {"build": build.name, "rule": build.rule, "end": build.end.isoformat(), "end_s": at - first,
            "slot_s_after": after, "slots": lanes or None, "even_s": after / lanes if lanes else None,
            "last_timing_end_s": max(_utc(j.end) for j in timing) - at}


# ------------------------------------------------------------------------------------- per GPU slot
def _utc(local: dt.datetime) -> float:
    return local.astimezone(dt.timezone.utc).timestamp()   # a naive stamp is this machine's local time


def _clip(intervals, lo: float, hi: float) -> list[tuple[float, float]]:
    return [(max(a, lo), min(b, hi)) for a, b in intervals if min(b, hi) > max(a, lo)]


def _minus(intervals, holes) -> list[tuple[float, float]]:
    """intervals less every hole."""
    out = []
    for a, b in intervals:
        pieces = [(a, b)]
        for h0, h1 in holes:
            pieces = [p for x, y in pieces for p in ((x, min(y, h0)), (max(x, h1), y)) if p[1] > p[0]]
        out += pieces
    return out


def measured_runs(results: Path) -> list[dict]:
    """Every measured run's rule, slot, start and end (epoch seconds) and in-job build seconds, from the run's
    environment rows (results/environment.parquet, or each job's environment file where that is not made)."""
    import polars as pl

    whole = results / "environment.parquet"
    files = [whole] if whole.exists() else sorted({*results.rglob("*.env.parquet"),
                                                   *results.rglob("jobs/**/environment.parquet")})
    if not files:
        return []
    env = pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed").unique("run_id", keep="first")
    builds: dict[str, float] = {}
    sweep = results / "study_a" / "sweep.parquet"
    if sweep.exists():
        df = pl.read_parquet(sweep).filter(pl.col("implementation").str.starts_with(IN_JOB_BUILDS))
        for run_id, seconds in df.group_by("run_id").agg(pl.col("build_s").fill_null(0).sum()).iter_rows():
            builds[run_id] = float(seconds)
    runs = []
    for r in env.iter_rows(named=True):
        if not (r.get("started_at") and r.get("ended_at")):
            continue
        slot = r.get("gpu_uuid") if r.get("device") == "cuda" and r.get("gpu_uuid") else "cpu"
        # the workers' loading where the row records it (wall time); before, the sweep table's compiled builds
        load = r.get("worker_load_s")
        runs.append({"rule": r["rule"], "run_id": r["run_id"], "slot": slot,
                     "build_s": load if load is not None else builds.get(r["run_id"], 0.0),
                     "worker_start_s": r.get("worker_start_s") or 0.0,
                     "job": _pairs(r.get("job") or "", ","),
                     "start": dt.datetime.fromisoformat(r["started_at"]).timestamp(),
                     "end": dt.datetime.fromisoformat(r["ended_at"]).timestamp(),
                     "taken": dt.datetime.fromisoformat(r["gpu_slot_taken_at"]).timestamp()
                     if r.get("gpu_slot_taken_at") else None})
    return runs


def _pairs(text: str, separator: str) -> dict[str, str]:
    """"a=1, b=2" (the log's wildcards) or "a=1,b=2" (an environment row's job) as a dict."""
    return dict(p.strip().split("=", 1) for p in text.split(separator) if "=" in p)


def timing_slots(runs: list[dict]) -> list[str]:
    """The slots timing jobs measured on: a GPU run's summaries and derived tables have cpu environment rows too."""
    return sorted({r["slot"] for r in runs if is_timing_rule(r["rule"])}) or ["cpu"]


@dataclass(frozen=True)
class Placed:
    """A finished timing job's place on a slot: when it took the slot and gave it back (epoch seconds), its runs."""
    slot: str
    taken: float
    given_back: float
    runs: list[dict]


def on_slots(done: list[Job], runs: list[dict], slots: list[str]) -> dict[Job, Placed]:
    """Each finished timing job's slot, when it took it and gave it back, and its measured runs. A job's runs are
    found by rule, time and wildcards (not a job beside it); a staged job holds its slot from its lock on
    (gpu_slots.stage), not from its start, and gives it back as its script ends (gpu_slots.release), before its
    process does: where the next job on its slot took the lock before this one ended, that is when this one gave
    it back. A timing job with no measured run on a box of several slots is left out: its GPU is not known."""
    placed, locked = {}, set()
    for job in (j for j in done if is_timing_rule(j.rule)):
        start, end = _utc(job.start), _utc(job.end)
        wildcards = _pairs(job.wildcards, ",")
        mine = [r for r in runs if r["rule"] == job.rule and r["start"] >= start - SLOP_S and r["end"] <= end + SLOP_S
                and all(r["job"][k] == v for k, v in wildcards.items() if k in r["job"])]
        slot = mine[0]["slot"] if mine else (slots[0] if len(slots) == 1 else None)
        if slot is None:
            continue
        taken = [r["taken"] for r in mine if r.get("taken") is not None]
        placed[job] = Placed(slot, min(max(start, min(taken)), end) if taken else start, end, mine)
        if taken:
            locked.add(job)
    for slot in {p.slot for p in placed.values()}:
        lane = sorted((j for j, p in placed.items() if p.slot == slot), key=lambda j: placed[j].taken)
        for a, b in zip(lane, lane[1:]):   # b's lock taken before a's end: a gave the slot back then
            if b in locked and placed[a].taken < placed[b].taken < placed[a].given_back:
                placed[a] = replace(placed[a], given_back=placed[b].taken)
    return placed


def slot_breakdown(jobs: dict[tuple[str, int], Job], runs: list[dict], placed: dict) -> list[dict]:
    """Each slot's held time (the logs' spans) split into measuring, start-up, builds, other and idle, and its
    timing jobs' time on it by rule (rules_s: a staged job's from its lock, so not its job seconds); its builds
    split into the workers' loading inside timing jobs (loading_s, and by rule loading_rules_s) and the time it
    waited while builds ran (waiting_s); `placed`: on_slots of the finished jobs."""
    done = [j for j in jobs.values() if j.end is not None]
    logs = {k[0] for k in jobs}
    spans = [(min(_utc(j.start) for k, j in jobs.items() if k[0] == log and j.end is not None),
              max(_utc(j.end) for k, j in jobs.items() if k[0] == log and j.end is not None))
             for log in logs if any(k[0] == log and j.end is not None for k, j in jobs.items())]
    held = sum(b - a for a, b in spans)
    slots = timing_slots(runs)
    per = {s: {"slot": s, "held_s": held, "jobs": 0, "measuring_s": 0.0, "start_up_s": 0.0, "builds_s": 0.0,
               "other_s": 0.0, "idle_s": 0.0, "rules_s": {}, "loading_s": 0.0, "loading_rules_s": {},
               "waiting_s": 0.0} for s in slots}
    occupied: dict[str, list[tuple[float, float]]] = {s: [] for s in slots}
    for job, p in placed.items():
        slot, start, end, mine = p.slot, p.taken, p.given_back, p.runs
        s = per[slot]
        inside = _clip([(r["start"], r["end"]) for r in mine], start, end)
        measured, builds = union_length(inside), sum(r["build_s"] for r in mine)
        builds = min(builds, measured)
        workers = min(sum(r["worker_start_s"] for r in mine), measured - builds)   # inside the runs, start-up
        start_up = max(0.0, min(a for a, _ in inside) - start) if inside else 0.0
        s["jobs"] += 1
        s["rules_s"][job.rule] = s["rules_s"].get(job.rule, 0.0) + (end - start)
        s["measuring_s"] += measured - builds - workers
        s["loading_s"] += builds
        s["loading_rules_s"][job.rule] = s["loading_rules_s"].get(job.rule, 0.0) + builds
        s["start_up_s"] += start_up + workers
        s["other_s"] += max(0.0, (end - start) - measured - start_up)
        occupied[slot].append((start, end))
    building = [(_utc(j.start), _utc(j.end)) for j in done if j.rule in BUILD_RULES]
    for slot, s in per.items():
        free = _minus(spans, occupied[slot])
        waiting = union_length([p for a, b in building for p in _clip(free, a, b)])
        s["waiting_s"] = waiting
        # where the slot stood idle: before its first timing job, between them, after its last (the schedule's tail)
        idle, mine = _minus(free, building), occupied[slot]
        first = min((a for a, _ in mine), default=math.inf)
        last = max((b for _, b in mine), default=math.inf)
        s["idle_start_s"] = union_length(_clip(idle, -math.inf, first))
        s["idle_gaps_s"] = union_length(_clip(idle, first, last))
        s["idle_end_s"] = union_length(_clip(idle, last, math.inf))
        s["builds_s"] = s["loading_s"] + waiting
        s["idle_s"] = max(0.0, held - s["measuring_s"] - s["start_up_s"] - s["builds_s"] - s["other_s"])
        for k in ("measuring", "start_up", "builds", "other", "idle"):
            s[f"{k}_pct"] = 100.0 * s[f"{k}_s"] / held if held else None
    return list(per.values())


def _gpu_lanes(slots: list[dict]) -> list[dict]:
    """The GPU slots: the CPU lane beside GPUs (gpus.cpu_beside) is not GPU time; a CPU run's one slot is its own."""
    return [s for s in slots if s["slot"] != "cpu"] or slots


def measuring_share(slots: list[dict]) -> float | None:
    """Measuring seconds over held seconds, every GPU slot together (_gpu_lanes)."""
    gpus = _gpu_lanes(slots)
    held = sum(s["held_s"] for s in gpus)
    return sum(s["measuring_s"] for s in gpus) / held if held else None


def jobs_share(slots: list[dict]) -> float | None:
    """Measuring seconds over the timing jobs' seconds on the same slots (held, less the waits while builds ran and
    the idle time): the most any schedule of the same jobs could reach, since only the jobs' own start-ups, loading
    and other time are left (_gpu_lanes)."""
    gpus = _gpu_lanes(slots)
    in_jobs = sum(s["measuring_s"] + s["start_up_s"] + s["loading_s"] + s["other_s"] for s in gpus)
    return sum(s["measuring_s"] for s in gpus) / in_jobs if in_jobs else None


def what_bounds(path: list[dict], slots: list[dict]) -> dict:
    """Whether the GPUs' load or the critical path's chain held the run. The path's waits (for its inputs' makers'
    successors to be scheduled, and inside a job for a slot) are the GPUs' load where the GPU slots were busy; where
    they were not, a place or the cores held the path while a GPU stood idle."""
    gpus = _gpu_lanes(slots)
    busy = min(1.0 - s["idle_s"] / s["held_s"] for s in gpus) if gpus and all(s["held_s"] for s in gpus) else None
    ran = sum(step["seconds"] for step in path)
    waited = sum((step["waited_s"] or 0.0) + (step["slot_wait_s"] or 0.0) for step in path)
    if waited <= ran:
        by = "chain"
    elif busy is not None and busy >= BUSY_BOUND:
        by = "gpu_load"
    else:
        by = "places"
    return {"by": by, "path_ran_s": ran, "path_waited_s": waited,
            "gpu_busy_pct": None if busy is None else round(100 * busy, 1)}


BOUND_TEXT = {"chain": "its critical path's chain of jobs (they waited less than they ran)",
              "gpu_load": "the GPUs' load (its critical path waited more than it ran, while every GPU slot was busy)",
              "places": "places or cores (its critical path waited more than it ran, while a GPU slot stood idle)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path, help="Snakemake logs, in the order the runs happened")
    parser.add_argument("--results", type=Path, help="the run's results/ folder: per GPU slot, where its time went")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    jobs = {}
    for log in args.logs:
        jobs.update(jobs_of(log.read_text(errors="replace").splitlines(), str(log)))
    result = summary(jobs)
    runs = measured_runs(args.results) if args.results is not None else None
    placed = on_slots([j for j in jobs.values() if j.end is not None], runs, timing_slots(runs)) if runs else {}
    result["critical_path"] = critical_path(jobs, placed)
    result["critical_path_s"] = sum(step["seconds"] for step in result["critical_path"])
    print(f"{'rule':32s} {'timing':>6s} {'jobs':>5s} {'ok':>4s} {'failed':>6s} {'open':>5s} {'job s':>8s} "
          f"{'longest':>8s}")
    for r in result["rules"]:
        print(f"{r['rule']:32s} {'yes' if r['timing'] else '':>6s} {r['jobs']:5d} {r['finished']:4d} "
              f"{r['failed']:6d} {r['unfinished']:5d} {r['job_s']:8.0f} {r['longest_s']:8.0f}")
    print(f"timing jobs {result['timing_job_s']:.0f} s of {result['all_job_s']:.0f} job-seconds; "
          f"first start {result['first_start']}, last end {result['last_end']}")
    print(f"critical path ({result['critical_path_s']:.0f} s of jobs, waits not counted):")
    for step in result["critical_path"]:
        waited = "" if step["waited_s"] is None else f" after waiting {step['waited_s']:.0f} s"
        if step["slot_wait_s"]:
            waited += f", then {step['slot_wait_s']:.0f} s of it for a GPU slot"
        print(f"  {step['start'][11:]} {step['seconds']:6.0f} s  {step['job']}{waited}")
    result["gate"] = gated = gate(jobs, placed)
    if gated is not None:
        lanes = gated["slots"]
        even = "" if gated["even_s"] is None else f" ({gated['even_s']:.0f} s each on {lanes} GPU slot" + (
            "s)" if lanes != 1 else ")")
        held = "" if gated["slot_s_after"] is None else (
            f" after it the timing jobs held their slots {gated['slot_s_after']:.0f} s{even}, and")
        print(f"gate: {gated['build']}, the last build a timing job read, ended {gated['end_s']:.0f} s after the "
              f"first start;{held} the last timing job ended {gated['last_timing_end_s']:.0f} s after it")
    if runs is not None:
        result["slots"] = slot_breakdown(jobs, runs, placed)
        result["measuring_share"] = measuring_share(result["slots"])
        result["measuring_share_of_jobs"] = jobs_share(result["slots"])
        result["bound"] = what_bounds(result["critical_path"], result["slots"])
        print(f"{'slot':24s} {'held s':>7s} {'jobs':>5s} " + " ".join(
            f"{k:>14s}" for k in ("measuring", "start-up", "builds", "other", "idle")))
        for s in result["slots"]:
            print(f"{s['slot'][:24]:24s} on the slot by rule: " + ", ".join(
                f"{rule} {sec:.0f} s" for rule, sec in sorted(s["rules_s"].items(), key=lambda kv: -kv[1])))
        for s in result["slots"]:
            print(f"{s['slot'][:24]:24s} builds: the workers' loading {s['loading_s']:.0f} s (" + ", ".join(
                f"{rule} {sec:.0f} s" for rule, sec in sorted(s["loading_rules_s"].items(), key=lambda kv: -kv[1])
                if sec) + f"), waiting while builds ran {s['waiting_s']:.0f} s")
        for s in result["slots"]:
            print(f"{s['slot'][:24]:24s} idle: {s['idle_start_s']:.0f} s before its first timing job, "
                  f"{s['idle_gaps_s']:.0f} s between them, {s['idle_end_s']:.0f} s after its last")
        for s in result["slots"]:
            print(f"{s['slot'][:24]:24s} {s['held_s']:7.0f} {s['jobs']:5d} " + " ".join(
                f"{s[k + '_s']:6.0f} s {s[k + '_pct']:4.0f}%" for k in ("measuring", "start_up", "builds", "other",
                                                                        "idle")))
        if result["measuring_share"] is not None:
            gpus = any(s["slot"] != "cpu" for s in result["slots"])
            of_jobs = result["measuring_share_of_jobs"]
            print(f"measuring: {100 * result['measuring_share']:.0f}% of the held {'GPU ' if gpus else ''}slots' time"
                  + ("" if of_jobs is None else f"; {100 * of_jobs:.0f}% of the timing jobs' time on them (with no "
                     "wait and no idle: what no schedule of these jobs can raise)"))
        bound = result["bound"]
        busy = "" if bound["gpu_busy_pct"] is None else f"; the least busy slot {bound['gpu_busy_pct']:.0f}% busy"
        print(f"bound by {BOUND_TEXT[bound['by']]}: the path ran {bound['path_ran_s']:.0f} s and waited "
              f"{bound['path_waited_s']:.0f} s{busy}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
