"""An ESTIMATE from a run's own job times: the jobs of one Snakemake log, each as long as it took, scheduled again on
N GPU slots. Issue 28 asks for the one-GPU time of the default config from the same run that measured two GPUs.

    python benchmarks/replay_on_gpus.py .snakemake/log/<run>.snakemake.log --results results --gpus 1 [--out x.json]

The model, every part from the run (benchmarks/run_time.py reads the same log and environment rows):
- A timing job on a GPU costs its time on its slot (from taking the slot's lock to giving it back, at its end or
  where the next job on its slot took it before: run_time.on_slots; a staged job's imports before that overlap the
  job before it, as they would on fewer GPUs), and the slot passes to the next job after the run's median handoff
  (a slot's free time between two jobs where the next was already waiting).
- Timing jobs on the CPU (Study B's cpu pair) keep their own lane where the run had them beside the GPUs
  (gpus.cpu_beside: they overlapped GPU jobs); otherwise each takes every GPU slot, as gpu_slots.smk makes them.
- Every other job (data, builds, compile warm-ups, summaries, the report) starts as soon as its inputs exist and
  takes as long as it took: cores are not modelled (fewer GPUs leave more of them free, the timing slots' cores).
- A job is ready once every input that a job of the log made exists; among ready timing jobs a free slot takes the
  highest Snakemake priority first (the log's), then the one the run started first.
The replay on the run's own GPU count is the model's check: it should give about the run's span (first job's start
to last job's end), which is printed beside it; `scaled_s` multiplies each replay by their ratio (what the model
leaves out, cores and Snakemake's own choices, taken to cost the same share on fewer GPUs).

A what-if: --scale RULE=FACTOR (several) replays that rule's jobs FACTOR times as long (the check stays the run's
own, unscaled), so the replays say what a faster build or job would give, before building it (e.g. --scale
package_aoti=0.5 package_aoti_sweep=0.5: the AOTInductor packages, which gate gpu-smoke's two GPUs, twice as fast).

    python benchmarks/replay_on_gpus.py <log> --results results --gpus 1 2 --scale package_aoti=0.5
"""
from __future__ import annotations

import argparse
import heapq
import json
import statistics
from pathlib import Path

from run_time import Job, _utc, inputs_made_by, jobs_of, measured_runs, on_slots, timing_slots

from abstraction_cost.measure.gpu_slots import is_timing_rule


def costs(jobs: list[Job], runs: list[dict]) -> tuple[dict[Job, tuple[str, float]], float, bool]:
    """Each job's lane ("gpu", "cpu" or "any": not a timing job) and seconds; the median handoff between two jobs
    on one slot; whether the run had its CPU timing jobs beside its GPU jobs."""
    slots = timing_slots(runs)
    placed = on_slots(jobs, runs, slots)
    lane = {}
    for job in jobs:
        if job in placed:
            p = placed[job]
            lane[job] = ("cpu" if p.slot == "cpu" else "gpu", p.given_back - p.taken)
        else:   # not a timing job, or one whose slot is not known (counted as a GPU's)
            lane[job] = ("gpu" if is_timing_rule(job.rule) else "any", (job.end - job.start).total_seconds())
    handoffs = []
    for slot in {p.slot for p in placed.values()}:
        held = sorted((p.taken, p.given_back, _utc(j.start)) for j, p in placed.items() if p.slot == slot)
        handoffs += [b[0] - a[1] for a, b in zip(held, held[1:]) if b[2] < a[1] <= b[0]]   # b waited for a
    gpu_spans = [(p.taken, p.given_back) for p in placed.values() if p.slot != "cpu"]
    beside = any(p.slot == "cpu" and any(a < p.given_back and p.taken < b for a, b in gpu_spans)
                 for p in placed.values())
    return lane, (statistics.median(handoffs) if handoffs else 0.0), beside


def replay(jobs: list[Job], lane: dict[Job, tuple[str, float]], gpus: int, handoff_s: float, beside: bool) -> float:
    """The schedule's span from the first job's start, in seconds."""
    needs = {j: set(makers) for j, makers in inputs_made_by(jobs).items()}
    order = {j: i for i, j in enumerate(sorted(jobs, key=lambda j: j.start))}
    rank = lambda j: (-j.priority, order[j])  # noqa: E731
    done: set[Job] = set()
    ended: dict[Job, float] = {}
    free_at = [0.0] * gpus          # each GPU slot's next free time
    cpu_free_at = 0.0
    running: list[tuple[float, int, Job]] = []   # (end, tiebreak, job)
    waiting = set(jobs)
    now = 0.0
    while waiting or running:
        ready = sorted((j for j in waiting if needs[j] <= done), key=rank)
        for job in ready:   # each starts now if its lane is free, else waits for the next event
            kind, seconds = lane[job]
            if kind == "cpu" and beside:
                if cpu_free_at > now:
                    continue
                cpu_free_at = now + seconds + handoff_s
            elif kind == "cpu":   # takes every GPU slot
                if max(free_at) > now:
                    continue
                free_at = [now + seconds + handoff_s] * gpus
            elif kind == "gpu":
                slot = min(range(gpus), key=lambda k: free_at[k])
                if free_at[slot] > now:
                    continue
                free_at[slot] = now + seconds + handoff_s
            waiting.discard(job)
            heapq.heappush(running, (now + seconds, order[job], job))
        # the next event: a job's end, or a slot's handoff ending while timing jobs wait
        ends = [running[0][0]] if running else []
        ends += [t for t in [*free_at, cpu_free_at] if t > now]
        if not ends:
            break   # nothing runs and nothing can start: an input no job makes (left out of the replay)
        now = min(ends)
        while running and running[0][0] <= now:
            end, _, job = heapq.heappop(running)
            done.add(job)
            ended[job] = end
    return max(ended.values(), default=0.0)


def scales(pairs: list[str], rules: set[str], parser: argparse.ArgumentParser) -> dict[str, float]:
    """--scale's RULE=FACTOR pairs; a rule the log has no job of, or a factor that is not a positive number, is an
    error that names it."""
    scale = {}
    for pair in pairs:
        rule, _, factor = pair.partition("=")
        try:
            scale[rule] = float(factor)
        except ValueError:
            parser.error(f"--scale {pair}: FACTOR must be a number")
        if rule not in rules:
            parser.error(f"--scale {pair}: the log has no job of rule {rule!r}")
        if not scale[rule] > 0:
            parser.error(f"--scale {pair}: FACTOR must be positive")
    return scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="the run's Snakemake log")
    parser.add_argument("--results", type=Path, required=True, help="the run's results/ folder")
    parser.add_argument("--gpus", type=int, nargs="+", default=[1])
    parser.add_argument("--scale", nargs="+", default=[], metavar="RULE=FACTOR",
                        help="a what-if: that rule's jobs FACTOR times as long")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    jobs = [j for j in jobs_of(args.log.read_text(errors="replace").splitlines(), str(args.log)).values()
            if j.end is not None]
    runs = measured_runs(args.results)
    lane, handoff_s, beside = costs(jobs, runs)
    scale = scales(args.scale, {j.rule for j in jobs}, parser)
    what_if = {j: (kind, seconds * scale.get(j.rule, 1.0)) for j, (kind, seconds) in lane.items()}
    run_gpus = len([s for s in timing_slots(runs) if s != "cpu"]) or 1
    span = max(_utc(j.end) for j in jobs) - min(_utc(j.start) for j in jobs)
    result = {"estimate": "replayed from the run's own job times (benchmarks/replay_on_gpus.py), not measured",
              "log": args.log.name, "run_gpus": run_gpus, "run_span_s": span, "handoff_s": handoff_s,
              "cpu_beside": beside, "scale": scale, "replay_on_run_gpus_s": replay(jobs, lane, run_gpus, handoff_s, beside),
              "replays": {str(n): replay(jobs, what_if, n, handoff_s, beside) for n in args.gpus}}
    check = result["replay_on_run_gpus_s"]
    result["scaled_s"] = {n: seconds * span / check for n, seconds in result["replays"].items()} if check else {}
    print(f"the run: {run_gpus} GPU(s), first job's start to last job's end {span:.0f} s; handoff {handoff_s:.1f} s;"
          f" CPU timing jobs {'beside the GPUs' if beside else 'alone'}")
    print(f"replayed on {run_gpus} GPU(s) (the model's check): {result['replay_on_run_gpus_s']:.0f} s")
    for n, seconds in result["replays"].items():
        scaled = result["scaled_s"].get(n)
        print(f"replayed on {n} GPU(s): {seconds:.0f} s ({seconds / 60:.1f} minutes), scaled by the check "
              f"{scaled / 60:.1f} minutes: an estimate" if scaled else f"replayed on {n} GPU(s): {seconds:.0f} s")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
