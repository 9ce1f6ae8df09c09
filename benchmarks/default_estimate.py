"""An ESTIMATE, not a measurement: a config's end-to-end wall time on N H100s, from per-job costs measured on H100s
(docs/results/) and a list schedule of its timing jobs on the GPU slots. It sized config/config.yaml for issue 28's
"at most 20 minutes on two H100s, from cold caches, the report included"; the measured time replaces it (README).
Its constants predate `protocol.prepare_together` (a job's invocations loading at once): it models every
invocation's worker start-ups and loads one after another, so it overestimates the sweep, the comparison and the
vision jobs until a run with it recalibrates them.

    python benchmarks/default_estimate.py config/config.yaml --gpus 2 [--out estimate.json]

The model (every constant below names its basis; a GUESS is a number no run has measured). The basis is
gpu-smoke on one H100 from cold caches (2026-11-26, `docs/results/2026-11-26-h100-gpu-smoke-staged-starts.md`:
the phase logs of its timing jobs), with fork-served workers and staged starts, and the default config's own run on
two H100s (DEFAULT_RUN: its timing jobs' slot times and phase logs), which set the sweep's, the comparison's, the
training jobs' and the vision jobs' constants:
- The run: Snakemake's start, data and weights, the first jobs (FIXED_START_S) and the summaries and the report
  after the last timing job (TAIL_S).
- Each timing job pays START_S on its slot: the last job's exit and its own CUDA context (its interpreter and
  imports overlap the job before it: staged starts).
- Timing jobs on the CPU (Study B's cpu pair) take every timing slot (gpu_slots.smk): they run alone, so their
  time adds to the run's whole; with gpus.cpu_beside (gpu_slots.cpu_beside) they are list-scheduled on a CPU
  slot of their own beside the GPU slots instead (that neither side slows the other: measured for a GPU job on
  two H200s, docs/results/2026-11-27-h200x2-default.md; a GUESS for the CPU pair's own times);
  GPU timing jobs are list-scheduled on the GPU slots, longest first, each once its
  inputs can exist (the C++ programs' builds, the AOTInductor packages).
- The sweep: per shard job and invocation, the workers' start (WORKERS_START_S) and per cell the slowest worker's
  load (LOAD_CELL_S; the workers load at once, their first calls on one GPU add up), each implementation's warm-up
  (PREPARE_CELL_S) and `blocks` turns of max(block_ms, a call); the first invocation's profiled pass
  (PROFILE_CELL_S per implementation and cell) and cold compiled builds (COMPILE_BUILD_S per mode, the modes in
  parallel) unless the sweep's compile warm-up (study_a.sweep.compile_warm_up) makes them before the job, beside
  the AOTInductor package it also waits for (one whose modes autotune holds a GPU slot: a job of the GPU schedule);
  every cell walked `invocations` times and EXTRA_SHARE of the invocations up to max_invocations
  more (DEFAULT_RUN: both jobs walked all 5, nearly every cell outside `precision` after 3), then SWEEP_END_S.
- The backend comparison: one job per numerics, EVAL_INVOCATION_S per invocation (cudnn-benchmark's workers each
  search their convolution algorithms), EXTRA_SHARE of the further invocations (EVAL_EXTRA_SHARE where one
  numerics took another share).
- Training: a job's fixed cost TRAIN_JOB_S, then per epoch, steps × max(TRAIN_STEP_FLOOR_S, 3 ×
  SECONDS_PER_PIXEL × batch × resolution²) and the test split's evaluation likewise (the floor: a ResNet-50
  step's launches; GUESS from gpu-smoke's 2 epochs of 32 steps in about 10 s of job).
- Study B: a building-block case BLOCK_CASE_S per mode (gpu-smoke: five jobs, 16-20 s each); a vision job
  VISION_BASE_S per model and batch under the protocol's 3 invocations (measured: the default config's six jobs at
  batch 1 in both of its runs on two H100s, 2026-11-26: the layer step, three invocations whose compiled worker
  reloads the model and its blocks from Inductor's cache, the timing methods; gpu-smoke's quieter host took 67 s
  for MobileNetV2's batch 1 where these took 115-122 s), on the cpu pair VISION_CPU_FACTOR times that (DEFAULT_RUN,
  projected from the part that ran), each further mode VISION_MODE_S per batch
  (GUESS: a second compiled worker beside the first, and its turns). Each Study B job starts after its own compile
  warm-up (cold caches: VISION_WARM_UP_S per model, BLOCK_WARM_UP_S per mode, the slowest experiment's; measured in
  the same run, 27 warm-ups on the 16 cores that time nothing); an autotuning warm-up (max-autotune on the GPU) holds
  a GPU slot for its AUTOTUNE_WARM_UP_S, a job of the GPU schedule.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from abstraction_cost import config as config_module
from abstraction_cost.measure import gpu_slots
from abstraction_cost.study_a.sweep import shards as sweep_shards
from abstraction_cost.study_a.sweep.cells import PROTOCOL_DEFAULTS, Protocol, SweepSettings
from abstraction_cost.study_a.sweep.kernel_point import read_from_sweep
from abstraction_cost.study_b.compile_cache import AUTOTUNE_MODES
from abstraction_cost.study_b.models.protocol import PROTOCOL_DEFAULTS as VISION_PROTOCOL_DEFAULTS

# gpu-smoke on one H100 from cold caches, measured (2026-11-26, staged starts), against this model's estimate of
# it: `calibrated_s` scales an estimate by their ratio
GPU_SMOKE_MEASURED_S = 879.0
# gpu-smoke as that run had it, since resized (vision jobs at batch 1 only, the sweep in one transfer mode)
GPU_SMOKE_AS_MEASURED = {("study_b", "models", "batch_size"): {"cpu": [1], "gpu": [1, 32]},
                         ("study_a", "sweep", "batches"): [8, 32],
                         ("study_a", "sweep", "transfers"): ["float32-pageable", "uint8-pinned"],
                         ("study_a", "sweep", "compile_warm_up"): False}   # its first invocation compiled cold
FIXED_START_S = 32.0           # gpu-smoke: Snakemake's start 12 s, the first timing job 20 s later
TAIL_S = 30.0                  # gpu-smoke: the comparison's summary 10 s, the report 17 s
START_S = 1.2                  # gpu-smoke: the next job took the slot 0.8-1.6 s after the last one ended (its
# process's exit frees the lock), and began measuring 15-46 ms later
SECONDS_PER_PIXEL = sweep_shards.SECONDS_PER_PIXEL
# the sweep, from the default config's run on two H100s (DEFAULT_RUN: 12 cells, 10 implementations, two shard jobs;
# warm invocations of 90-112 s after the first's 194-204 s); gpu-smoke's (8 cells) had 2.4, 2.6, 0.08 and 0.29
SWEEP_END_S = 34.0             # the last invocation's end to the job's: logits checked, tables written
WORKERS_START_S = 2.9          # forked workers up: 2.6-3.4 s
LOAD_CELL_S = 4.2              # loading 49-56 s for 12 cells: the two compiled workers' builds from the cache
PREPARE_CELL_S = 0.09          # preparing 9.7-11.5 s for 120 implementation-cells
PROFILE_CELL_S = 0.37          # the profiled pass: 41.9-46.6 s for 120 implementation-cells
# the share of the invocations up to max_invocations that a cell not yet within `precision` takes: DEFAULT_RUN's
# sweep jobs both ran all 5 (fp32's 4th and 5th over 11 and 9 of 12 cells, tf32's over all 12), and its backend
# comparison all 8 in fp32 and tf32; cudnn-benchmark stopped at 3 (EVAL_EXTRA_SHARE)
EXTRA_SHARE = 1.0
COMPILE_BUILD_S = {"default": 42.0, "reduce-overhead": 42.0, "max-autotune": 120.0}   # cold, beside the loads: the
# first invocation's loading 92-97 s against 49-56; max-autotune a GUESS (it benchmarks every convolution's candidates)
KERNEL_JOB_S = 17.0            # default sweep 2026-11-25: fp32 kernel jobs 15-19 s each, ncu included
KERNEL_COMPILED_S = 63.0
AOTI_PACKAGE_S = 109.0         # gpu-smoke: package_aoti_sweep, on the CPUs (the default's, beside its warm-ups: 146 s)
NATIVE_BUILD_S = 120.0         # GUESS: the C++ programs' build before their first timing job
# the backend comparison, one job per numerics: an invocation of its eight workers (DEFAULT_RUN: 8.4-10.0 s in
# fp32 and tf32 after the first's 10.8-19.6, 19.1-21.6 s with cudnn-benchmark's algorithm searches)
EVAL_INVOCATION_S = {"cudnn-benchmark": 19.2}
EVAL_INVOCATION_DEFAULT_S = 9.2
EVAL_EXTRA_SHARE = {"cudnn-benchmark": 0.0}
# training: a job's fixed cost on its slot (DEFAULT_RUN: 36 jobs of 2,048 samples held their slots 393 s, about
# 11 s each, of which their steps are about 1.5 s: the C++ programs' and Python's start, CUDA, data, the checks)
TRAIN_JOB_S = 6.2
TRAIN_STEP_FLOOR_S = 0.025
EVAL_STEP_FLOOR_S = 0.008
DATASETS = {"mnist": (60000, 10000), "cifar10": (50000, 10000), "stl10": (5000, 8000), "voc2012": (5717, 5823)}
# Study B
BLOCK_CASE_S = {"default": 3.0, "reduce-overhead": 3.0, "max-autotune": 8.0, "max-autotune-no-cudagraphs": 8.0}
CPU_CASE_FACTOR = 2.0          # GUESS: a case on the CPU pair (compile and calls on the host)
# the two runs of the default config on two H100s (2026-11-26: the first's 64, 56, 127, 122, 103, 161 s, DEFAULT_RUN's
# 63, 66, 127, 115, 113, 176 s on the slot), their mean
VISION_BASE_S = {"alexnet": 63.5, "squeezenet1_1": 61.0, "resnet50": 127.0, "mobilenet_v2": 118.5,
                 "googlenet": 108.0, "densenet121": 168.5}
VISION_WARM_UP_S = {"alexnet": 131.0, "squeezenet1_1": 152.0, "resnet50": 161.0, "mobilenet_v2": 186.0,
                    "googlenet": 260.0, "densenet121": 316.0}
BLOCK_WARM_UP_S = {"default": 63.0, "reduce-overhead": 42.0, "max-autotune": 275.0, "max-autotune-no-cudagraphs": 315.0}
# the autotuning warm-ups by experiment (same run); resnet50_convs' in-model case had not ended after 505 s: GUESS
AUTOTUNE_WARM_UP_S = {("matmul", "max-autotune"): 275.0, ("matmul", "max-autotune-no-cudagraphs"): 278.0,
                      ("conv_ablation", "max-autotune"): 205.0, ("conv_ablation", "max-autotune-no-cudagraphs"): 190.0,
                      ("conv_blocks", "max-autotune"): 105.0, ("conv_blocks", "max-autotune-no-cudagraphs"): 87.0,
                      ("resnet50_convs", "max-autotune-no-cudagraphs"): 315.0 + 600.0}
VISION_MODE_S = {"default": 15.0, "reduce-overhead": 15.0, "max-autotune": 40.0, "max-autotune-no-cudagraphs": 35.0}
# the cpu pair's job against the GPU's: DEFAULT_RUN's ResNet-50 on the CPU had run 333 s (its layer step 123 s, two
# of three invocations of 90 and 101 s) when the machine went back; about 470 s with its third invocation and its
# timing methods (a projection) against 127 s on a GPU
VISION_CPU_FACTOR = 3.7
# the run the constants above marked DEFAULT_RUN come from
DEFAULT_RUN = "docs/results/2026-11-26-h100x2-default-unfinished.md"


def _resolution(dataset: str, config: dict) -> int:
    base = dataset.removeprefix("synthetic-")
    return {"mnist": config["data"]["digits"]["resolution"], "digits": config["data"]["digits"]["resolution"],
            "cifar10": 32, "stl10": 96}.get(base, config["data"]["voc_resolution"])


def _samples(dataset: str, config: dict) -> tuple[int, int]:
    if dataset.startswith("synthetic") or dataset == "digits":
        s = config["data"]["synthetic"]
        train, test = s["train_samples"], s["test_samples"]
    else:
        train, test = DATASETS[dataset]
    cap = lambda n, limit: n if limit is None else min(n, limit)  # noqa: E731
    return cap(train, config["data"]["limit_train"]), cap(test, config["data"]["limit_test"])


def training_jobs(config: dict) -> list[dict]:
    t = config["study_a"]["training"]
    jobs = []
    for dataset in t["datasets"]:
        res = _resolution(dataset, config)
        batch = t.get("batch_size_overrides", {}).get(dataset, t["batch_size"])
        train, test = _samples(dataset, config)
        step = max(TRAIN_STEP_FLOOR_S, 3 * SECONDS_PER_PIXEL * batch * res ** 2)
        evaluate = max(EVAL_STEP_FLOOR_S, SECONDS_PER_PIXEL * t["eval_batch_size"] * res ** 2)
        epoch = math.ceil(train / batch) * step + math.ceil(test / t["eval_batch_size"]) * evaluate
        seconds = START_S + TRAIN_JOB_S + t["epochs"] * epoch
        for backend in t["backends"]:
            for init in t["inits"]:
                for seed in range(t["repeats"]):
                    jobs.append({"job": f"train_{backend}[{dataset},{init},{seed}]", "s": seconds,
                                 "after": NATIVE_BUILD_S if backend != "eager" else 0.0})
    return jobs


def eval_jobs(config: dict) -> list[dict]:
    """One job per numerics, every implementation interleaved: `invocations`, and the share of the rest up to
    max_invocations that its cell took in DEFAULT_RUN (batch 32 at 224 px is near the host-bound edge)."""
    b = config["study_a"]["backends"]
    p = {**PROTOCOL_DEFAULTS, **(b.get("protocol") or {})}
    after = AOTI_PACKAGE_S if "aoti" in b["implementations"] else NATIVE_BUILD_S
    jobs = []
    for numerics in b["numerics"]:
        share = EVAL_EXTRA_SHARE.get(numerics, EXTRA_SHARE)
        invocations = p["invocations"] + share * max(0, p["max_invocations"] - p["invocations"])
        jobs.append({"job": f"eval_backend[{numerics}]", "after": after,
                     "s": START_S + invocations * EVAL_INVOCATION_S.get(numerics, EVAL_INVOCATION_DEFAULT_S)})
    return jobs


def _sweep_invocation_s(cells, impls: int, protocol: Protocol) -> float:
    """One invocation of a shard: its workers' start, then per cell the loads, warm-ups and turns."""
    seconds = WORKERS_START_S
    for cell in cells:
        call_s = SECONDS_PER_PIXEL * cell.batch * cell.resolution ** 2
        turns = protocol.blocks * max(protocol.block_ms / 1000, call_s)
        seconds += LOAD_CELL_S + impls * (2 * call_s + PREPARE_CELL_S + turns)
    return seconds


def sweep_jobs(config: dict) -> list[dict]:
    settings = SweepSettings.from_config(config)
    protocol = Protocol.from_config(config["study_a"]["sweep"])
    impls = settings.jobs()
    modes = [i.removeprefix("compiled-") for i in impls if i.startswith("compiled-")]
    builds = max((COMPILE_BUILD_S.get(m, 60.0) for m in modes), default=0.0)   # the modes' workers in parallel
    warm_up = bool(modes) and protocol.mode == "interleaved" and config["study_a"]["sweep"].get("compile_warm_up", True)
    jobs = []
    for numerics in settings.numerics:
        for k, cells in enumerate(sweep_shards.of_config(config)):
            invocation = _sweep_invocation_s(cells, len(impls), protocol)
            extra = math.ceil((protocol.max_invocations - protocol.invocations) * EXTRA_SHARE)
            seconds = START_S + (protocol.invocations + extra) * invocation + SWEEP_END_S
            if not warm_up:   # cold, in its first invocation on the slot
                seconds += builds
            elif any(m in AUTOTUNE_MODES for m in modes):   # the warm-up holds a GPU slot while it builds
                jobs.append({"job": f"compile_cache_sweep[{numerics},shard{k}]", "s": builds, "after": 0.0})
            if protocol.profile_calls:
                seconds += PROFILE_CELL_S * len(cells) * len(impls)
            jobs.append({"job": f"sweep[{numerics},shard{k}]", "s": seconds,
                         "after": max(AOTI_PACKAGE_S, builds) if warm_up else AOTI_PACKAGE_S})
        for impl in impls:  # kernel jobs where the sweep's profiled pass does not give the kernel table
            if numerics in settings.kernel_numerics and not read_from_sweep(settings, protocol.profile_calls):
                jobs.append({"job": f"sweep_kernels_job[{numerics},{impl}]",
                             "s": KERNEL_COMPILED_S if impl.startswith("compiled-") else KERNEL_JOB_S,
                             "after": AOTI_PACKAGE_S if impl == "aoti" else NATIVE_BUILD_S})
    return jobs


def _block_cases(experiment: str, e: dict, pair: str) -> int:
    if experiment == "matmul":
        return len(e["sizes"][pair])
    if experiment == "conv_ablation":
        return len(e["kernels"]) * len(e["strides"]) * sum(len(p) for p in e["padding_sets"].values())
    if experiment == "resnet50_convs":
        return (e.get("limit") or 20) + 1   # ResNet-50's distinct convolutions (about 20), and the model's
    if experiment == "conv_blocks":
        return e["n_max"]
    return 0


def study_b_jobs(config: dict) -> tuple[list[dict], list[dict]]:
    """(GPU jobs, CPU jobs)."""
    gpu, cpu = [], []
    blocks = config["study_b"]["blocks"]
    rounds = blocks["timing"]["rounds"] * blocks["timing"]["repeats_per_round"] / 20
    for experiment in ("matmul", "conv_ablation", "resnet50_convs", "conv_blocks"):
        e = blocks[experiment]
        for pair in e["pairs"]:
            for mode in e["modes"]:
                s = START_S + _block_cases(experiment, e, pair) * BLOCK_CASE_S[mode] * (0.5 + 0.5 * rounds)
                job = {"job": f"study_b_block_timing[{experiment},{pair},{mode}]", "s": s,
                       "after": BLOCK_WARM_UP_S[mode]}
                (gpu if pair == "gpu" else cpu).append(
                    job if pair == "gpu" else {**job, "s": START_S + (s - START_S) * CPU_CASE_FACTOR})
                if pair == "gpu" and mode in AUTOTUNE_MODES:   # an autotuning warm-up holds a GPU slot
                    gpu.append({"job": f"compile_cache_blocks[{experiment},{pair},{mode}]",
                                "s": AUTOTUNE_WARM_UP_S.get((experiment, mode), BLOCK_WARM_UP_S[mode]), "after": 0.0})
    m = config["study_b"]["models"]
    p = {**VISION_PROTOCOL_DEFAULTS, **(m.get("protocol") or {})}
    invocations = p["invocations"] + EXTRA_SHARE * max(0, p["max_invocations"] - p["invocations"])
    for pair in ("gpu", "cpu"):
        for model in m["models"][pair]:
            per_batch = (VISION_BASE_S[model] + sum(VISION_MODE_S[mode] for mode in m["modes"][1:])) * invocations / 3
            batches = m["batch_size"][pair] if isinstance(m["batch_size"], dict) else m["batch_size"]
            s = START_S + (len(batches) if isinstance(batches, list) else 1) * per_batch
            if pair == "cpu":
                s = START_S + (s - START_S) * VISION_CPU_FACTOR
            (gpu if pair == "gpu" else cpu).append({"job": f"vision_model[{pair},{model}]", "s": s,
                                                    "after": VISION_WARM_UP_S[model]})
    return gpu, cpu


def schedule(jobs: list[dict], slots: int) -> tuple[float, list[float]]:
    """Longest first onto the slot free first, each job not before its `after`: (makespan, each slot's busy s)."""
    free, busy = [0.0] * slots, [0.0] * slots
    todo = sorted(jobs, key=lambda j: -j["s"])
    while todo:
        k = min(range(slots), key=lambda i: free[i])
        ready = [j for j in todo if j["after"] <= free[k]]
        job = ready[0] if ready else min(todo, key=lambda j: (j["after"], -j["s"]))
        free[k] = max(free[k], job["after"]) + job["s"]
        busy[k] += job["s"]
        todo.remove(job)
    return max(free), busy


def estimate(config: dict, gpus: int) -> dict:
    gpu_b, cpu_b = study_b_jobs(config)
    families = {"training": training_jobs(config), "backend comparison": eval_jobs(config),
                "sweep and kernels": sweep_jobs(config), "Study B on the GPU": gpu_b}
    gpu_jobs = [j for js in families.values() for j in js]
    makespan, busy = schedule(gpu_jobs, gpus)
    cpu_s = sum(j["s"] for j in cpu_b)
    beside = gpu_slots.cpu_beside(config, gpus)
    if beside:   # the CPU slot beside the GPU slots, not after them
        total = FIXED_START_S + max(makespan, schedule(cpu_b, 1)[0] if cpu_b else 0.0) + TAIL_S
    else:
        total = FIXED_START_S + makespan + cpu_s + TAIL_S
    return {"estimate": True, "basis": DEFAULT_RUN, "gpus": gpus, "cpu_beside": beside, "total_s": round(total, 1),
            "calibrated_s": round(total * calibration(), 1), "gpu_schedule_s": round(makespan, 1),
            "cpu_timing_jobs_s": round(cpu_s, 1), "fixed_s": FIXED_START_S + TAIL_S,
            "slot_busy_s": [round(b, 1) for b in busy],
            "families_s": {name: round(sum(j["s"] for j in js), 1) for name, js in
                           {**families, "Study B on the CPU": cpu_b}.items()},
            "longest": sorted(({"job": j["job"], "s": round(j["s"], 1)} for j in gpu_jobs + cpu_b),
                              key=lambda j: -j["s"])[:8]}


def measured_gpu_smoke() -> dict:
    """config/gpu-smoke.yaml at the size GPU_SMOKE_MEASURED_S was measured at."""
    smoke = config_module.load(Path(__file__).resolve().parents[1] / "config" / "gpu-smoke.yaml")
    for *path, key in GPU_SMOKE_AS_MEASURED:
        section = smoke
        for name in path:
            section = section[name]
        section[key] = GPU_SMOKE_AS_MEASURED[(*path, key)]
    return smoke


def calibration() -> float:
    """Measured over estimated, for gpu-smoke on one GPU (GPU_SMOKE_MEASURED_S)."""
    smoke = measured_gpu_smoke()
    gpu_b, cpu_b = study_b_jobs(smoke)
    jobs = training_jobs(smoke) + eval_jobs(smoke) + sweep_jobs(smoke) + gpu_b
    total = FIXED_START_S + schedule(jobs, 1)[0] + sum(j["s"] for j in cpu_b) + TAIL_S
    return GPU_SMOKE_MEASURED_S / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = {"config": str(args.config), **estimate(config_module.load(args.config), args.gpus)}
    print(f"ESTIMATE for {args.config} on {args.gpus} H100s: {result['total_s'] / 60:.1f} min, "
          f"{result['calibrated_s'] / 60:.1f} min scaled by gpu-smoke's measured / estimated time "
          f"({result['gpu_schedule_s']:.0f} s of GPU timing jobs scheduled, {result['cpu_timing_jobs_s']:.0f} s of "
          f"CPU timing jobs {'on the CPU slot beside them' if result['cpu_beside'] else 'alone'}, "
          f"{result['fixed_s']:.0f} s start and report)")
    for name, seconds in result["families_s"].items():
        print(f"  {name:24s} {seconds:7.0f} s of jobs")
    for job in result["longest"]:
        print(f"  longest: {job['job']:48s} {job['s']:6.0f} s")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
