"""GPU slots: on a box with N GPUs, up to N timing jobs at once, one per GPU, never two on one.

Two halves share the tables below:
- Snakemake (workflow/rules/gpu_slots.smk) counts: every timing job on the GPU asks for `gpu=1` of a total of
  `timing_total(slots(config))`, two per GPU (one timing, the next one staged, below) and `long_places` more for
  long jobs (is_long), which the others may not take (`short_total`); a CPU timing job asks for every unit,
  so it runs alone, or with gpus.cpu_beside (`cpu_beside`) for the one unit of `cpu_slot` and times on cores of
  its own (affinity.pin_cpu) beside the GPU slots' jobs.
- Inside a job, `take(snakemake, log)` chooses which GPU: it holds an exclusive flock on one lock file per GPU
  UUID (LOCK_DIR) and sets CUDA_VISIBLE_DEVICES to that GPU before CUDA is initialised. The kernel drops a flock
  when its holder dies, so a killed job frees its GPU; a worker or C++ program the job launches holds it too
  (`held_fds`). The job gives it back as its script ends (`release`, once no process it started holds it), so
  that the next job takes the GPU while this one exits, or else when its process exits.

Staged starts: Snakemake runs up to STAGED_PER_SLOT timing jobs per GPU slot, so that while one job times on a
GPU the next one starts. The invariant: a staged job holds neither the GPU nor a timing core until take(), so its
start (interpreter, imports, its fork server's imports) is paid while the GPU measures another job, not while it
waits for this one, and never on the cores or the device of the job measuring (what it saved is measured in
docs/results/2026-11-26-h100-gpu-smoke-staged-starts.md). `stage(snakemake)`,
the first call of a timing script, keeps the job off the timing slots' cores until it has its slot (the cores of
compiles and summaries, measure/affinity.py), so a staged job's imports do not disturb the job timing beside it;
`take`, after the imports, waits for the slot's lock and moves the job (every thread) onto the slot's cores. With
gpus.take_free_slot_at_start a job that finds a slot free as it starts (no job holds it, none waits for it in
acquire(), which keeps a place in LOCK_DIR/waiting meanwhile, and no long job in the line wants it) takes it in
stage() and imports on its quiet cores. The invariant: a job takes a slot early only where no job could time on it
meanwhile, so the slot's wait for that job's imports (at a run's start, after a build) shrinks and no ready job
waits longer (docs/results/ has what the wait was).

Long jobs first: a long job (is_long: the sweep's and Study B's vision jobs, the run's longest chains, and a backend
comparison whose workers each load alone) joins a line when it starts (a flocked file in LOCK_DIR/first-in-line
naming the GPUs it waits for), and a short job waiting for one of those GPUs leaves it to the long one; with places
of their own in Snakemake's total, one per GPU and one more, a long job starts even while short jobs and a long job
on every GPU hold the others. The invariant: no long job waits for a GPU behind a short job that became ready
before it, nor for a place while short jobs hold theirs (without the line a long job ready a moment after a few
short ones queued behind them all, on the run's critical path; with one long place it waited behind a short job
while a long one timed: docs/results/ has both waits). Among short jobs waiting, which takes a free GPU is the
order in which they look, so a comparison that loads its workers one at a time is long too: left to that order it
can go last, one GPU timing it while the other stands idle (docs/results/).

This module does not import torch: it must run before CUDA is initialised.
"""
from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import logging
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from .. import implementations, run_guard   # import no torch
from ..compile import inductor_env   # imports no torch
from ..programs import fork_server   # imports no torch
from . import affinity, numerics

LOCK_DIR = Path(os.environ.get("ABSTRACTION_COST_GPU_LOCK_DIR", "/tmp/abstraction-cost-gpu-locks"))
FAKE_GPUS_ENV = "ABSTRACTION_COST_FAKE_GPUS"  # tests: N fake GPUs instead of NVML's
POLL_S = 0.2
STAGED_PER_SLOT = 2   # timing jobs Snakemake runs per GPU slot: one timing, the next one starting (staged)
FIRST_IN_LINE = ("sweep", "vision_model")   # gpu_slots.smk gives them LONG_JOB_PRIORITY too

# Timing rules whose device is config["device"] (auto, cuda, cpu).
DEVICE_RULES = ("train_eager", "train_libtorch", "train_cudnn", "eval_backend", "sweep", "sweep_kernels_job")
# Timing rules whose wildcard `pair` (cpu | gpu) is their device.
PAIR_RULES = ("study_b_block_timing", "vision_model")
# The jobs of one comparison, for gpus.pin_comparisons: a rule's group name and the wildcards that, with it,
# name one comparison. Eager, LibTorch and cuDNN training of one (dataset, init, seed) are compared; every
# backend and numerics of the evaluation comparison; every numerics and implementation of the sweep (each job walks
# every transfer mode) and of its kernel table (tf32 is compared with fp32 too); the pairs and
# modes of one building-block experiment. A vision model's eager and compiled runs share one job already (as do
# Study B's interleaved pairs), so each model is its own comparison.
COMPARISON_WILDCARDS = {
    "train_eager": ("training", ("dataset", "init", "seed")),
    "train_libtorch": ("training", ("dataset", "init", "seed")),
    "train_cudnn": ("training", ("dataset", "init", "seed")),
    "eval_backend": ("backend_eval", ()),
    "sweep": ("sweep", ()),
    "sweep_kernels_job": ("sweep_kernels", ()),
    "study_b_block_timing": ("blocks", ("experiment",)),
    "vision_model": ("vision", ("pair", "model")),
}


class GpuSlotsError(ValueError):
    """A gpus setting this machine cannot meet; the message names the config key."""


@dataclass(frozen=True)
class Gpu:
    index: int  # NVML's index, as nvidia-smi numbers the box's GPUs
    uuid: str   # "GPU-..." as NVML and CUDA_VISIBLE_DEVICES write it


@dataclass(frozen=True)
class Slot:
    gpu: Gpu
    wait_s: float
    fd: int
    taken_at: str = ""   # when the lock was taken (ISO, UTC): where the job's time on the GPU starts


_held: Slot | None = None
_in_line: int | None = None   # a long job's place in the line (join_line), until it has its GPU


def _nvml_gpus() -> list[Gpu]:
    try:
        import pynvml
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
    except Exception:  # no driver, no pynvml: no GPU
        return []
    gpus = []
    for i in range(count):
        try:
            uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
        except Exception:  # a GPU a cluster's cgroup hides from this job
            continue
        gpus.append(Gpu(i, uuid.decode() if isinstance(uuid, bytes) else uuid))
    return gpus


def driver_cuda_version() -> str | None:
    """The newest CUDA the driver supports ('13.0'), from NVML; None without NVML, or with fake GPUs."""
    if os.environ.get(FAKE_GPUS_ENV) is not None:
        return None
    try:
        import pynvml
        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetCudaDriverVersion()
    except Exception:  # no driver, no pynvml
        return None
    return f"{version // 1000}.{version % 1000 // 10}"


def visible_gpus() -> list[Gpu]:
    """The GPUs this process may use: NVML's (or ABSTRACTION_COST_FAKE_GPUS fake ones), narrowed to
    CUDA_VISIBLE_DEVICES where an outer scheduler (SLURM) set it before the job started."""
    fake = os.environ.get(FAKE_GPUS_ENV)
    gpus = ([Gpu(i, f"GPU-fake-{i}") for i in range(int(fake))] if fake is not None else _nvml_gpus())
    outer = os.environ.get("CUDA_VISIBLE_DEVICES")
    if outer is None or outer.strip() == "":
        return gpus if outer is None else []
    wanted = [w.strip() for w in outer.split(",") if w.strip()]
    chosen = [g for w in wanted for g in gpus if (w.isdigit() and g.index == int(w)) or
              (w.startswith("GPU-") and g.uuid.startswith(w))]
    # a cgroup that shows a job only its own GPUs renumbers them: then NVML's list is already the allocation
    return chosen or gpus[:len(wanted)]


def slots(config: Mapping, gpus: list[Gpu] | None = None) -> int:
    """How many GPUs the pipeline times on at once: every visible GPU, or config gpus.slots of them."""
    gpus = visible_gpus() if gpus is None else gpus
    wanted = config.get("gpus", {}).get("slots")
    if wanted is None:
        return len(gpus)
    if wanted > len(gpus):
        raise GpuSlotsError(f"config key 'gpus.slots' is {wanted} but this machine has {len(gpus)} GPU(s) "
                            f"(NVML{', CUDA_VISIBLE_DEVICES' if 'CUDA_VISIBLE_DEVICES' in os.environ else ''}); "
                            f"set gpus.slots to at most {len(gpus)}, or leave it out to use every GPU")
    if wanted == 0 and config["device"] == "cuda":
        raise GpuSlotsError("config key 'gpus.slots' is 0 but config key 'device' is 'cuda': a GPU config needs "
                            "at least one GPU slot (leave gpus.slots out to use every GPU)")
    return wanted


def cluster_has_gpus() -> bool | None:
    """Whether any node of the SLURM cluster this host submits to has a GPU GRES (sinfo); None without sinfo."""
    try:
        out = subprocess.run(["sinfo", "--noheader", "--format=%G"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return any(g.strip().startswith("gpu") for line in out.stdout.splitlines() for g in line.split(","))


def resolve_on_cluster(device: str, has_gpus: bool | None) -> str:
    """config `device` as a cluster's timing jobs ask for it, given cluster_has_gpus(): `auto` is the GPU where the
    cluster has GPU nodes (the login node that reads the config has none of its own); refused where it has none
    or that cannot be told."""
    if device != "auto":
        return device
    if has_gpus:
        return "cuda"
    seen = "no node of the cluster has a GPU GRES (sinfo)" if has_gpus is False else "sinfo did not answer"
    raise GpuSlotsError(f"config key 'device' is 'auto', but on a cluster the jobs' device cannot be told from the "
                        f"login node, and {seen}: set device: cuda (each timing job asks SLURM for one GPU) or "
                        f"device: cpu (no job asks for a GPU)")


def is_timing_rule(rule: str) -> bool:
    return rule in DEVICE_RULES or rule in PAIR_RULES


def on_gpu(rule: str, wildcards: Mapping, config: Mapping, n_slots: int | None) -> bool:
    """Whether a timing job times on a GPU. n_slots None: GPUs unknown here (a cluster's login node), so only
    what the config names explicitly (device cuda, pair gpu) counts as the GPU."""
    if rule in PAIR_RULES:  # with device cpu the gpu pair is recorded as not_run, on no GPU
        return wildcards["pair"] == "gpu" and config["device"] != "cpu" and n_slots != 0
    if rule in DEVICE_RULES:
        device = config["device"]
        return device == "cuda" or (device == "auto" and bool(n_slots))
    raise KeyError(f"rule {rule!r} is not a timing rule of measure/gpu_slots.py (DEVICE_RULES, PAIR_RULES)")


# The config section whose require_gpu each timing rule obeys.
REQUIRE_GPU_SECTIONS = {"train_eager": ("study_a", "training"), "train_libtorch": ("study_a", "training"),
                        "train_cudnn": ("study_a", "training"), "eval_backend": ("study_a", "backends"),
                        "sweep": ("study_a", "sweep"), "sweep_kernels_job": ("study_a", "sweep"),
                        "study_b_block_timing": ("study_b", "blocks"), "vision_model": ("study_b", "models")}


def measures_nothing(rule: str, wildcards: Mapping, config: Mapping, n_slots: int | None) -> bool:
    """Whether a timing job can only write not_run rows on this box: it has no GPU slot (NVML finds no GPU, or
    gpus.slots is 0) and its rows need a GPU (the gpu pair, or its section's require_gpu). Such a job takes no
    timing resource, so it runs beside the others instead of keeping the CPU to itself (on a machine without a GPU
    the default config's every timing job is one); stage() hides CUDA from it, so it cannot time what its
    resources did not reserve. n_slots None (a cluster's login node) or device cuda: never."""
    if n_slots != 0 or config["device"] == "cuda":
        return False
    first, second = REQUIRE_GPU_SECTIONS[rule]
    if config[first][second].get("require_gpu", False):
        return True
    return rule in PAIR_RULES and wildcards["pair"] == "gpu"


def cpu_beside(config: Mapping, n_slots: int | None) -> bool:
    """Whether a CPU timing job times beside the GPU slots' jobs, on a CPU slot of its own cores, rather than
    alone on the box: config gpus.cpu_beside, on a box with GPU slots, where some jobs time on the GPU (not
    device cpu). Every job of a run splits the cores by it (affinity.plan's cpu_slot)."""
    return bool(config.get("gpus", {}).get("cpu_beside", False)) and bool(n_slots) and config["device"] != "cpu"


def slots_have_own_cores(n_slots: int | None, cpu_slot: bool, cpus=None) -> bool:
    """Whether each GPU slot's timing job times on cores that no other job of the run uses: affinity.plan splits
    this box's CPUs (`cpus`, else this process's) for `n_slots` slots, as every job of the run will."""
    return bool(n_slots) and affinity.plan(os.sched_getaffinity(0) if cpus is None else cpus, n_slots,
                                           cpu_slot=cpu_slot) is not None


def comparison_key(rule: str, wildcards: Mapping) -> str:
    group, names = COMPARISON_WILDCARDS[rule]
    return ":".join([group, *(str(wildcards[n]) for n in names)])


def pinned_gpu(key: str, candidates: list[Gpu]) -> Gpu:
    """The one GPU every job of a comparison runs on: a stable hash of its key over the slots."""
    return candidates[int(hashlib.sha256(key.encode()).hexdigest(), 16) % len(candidates)]


def _lock_path(uuid: str) -> Path:
    return LOCK_DIR / f"{uuid.removeprefix('GPU-')}.lock"


def _share(path: Path, mode: int) -> None:
    """Every user's jobs share the box's GPUs, so every user may lock (the first creator sets the mode)."""
    try:
        path.chmod(mode)
    except OSError:  # made by another user: already shared
        pass


def _try_lock(gpu: Gpu, owner: str) -> int | None:
    if not LOCK_DIR.is_dir():
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        _share(LOCK_DIR, 0o1777)
    path = _lock_path(gpu.uuid)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    _share(path, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)  # who holds it, for a person looking at a stuck run
    os.write(fd, f"{os.getpid()} {owner} {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}\n"
             .encode())
    return fd


LINE = "first-in-line"   # the long jobs, from their start until they have a GPU (join_line)
WAITING = "waiting"      # every job while it waits in acquire(): a job that starts then leaves a free GPU to it


def _enter(folder: str, candidates: list[Gpu], owner: str) -> int:
    """A place in LOCK_DIR/folder: a file this process holds a flock on (the kernel drops it when the process
    dies), naming the GPUs it waits for; made under another name and renamed, so it is never seen unlocked."""
    where = LOCK_DIR / folder
    if not where.is_dir():
        where.mkdir(parents=True, exist_ok=True)
        _share(LOCK_DIR, 0o1777)
        _share(where, 0o1777)
    making = where / f".{os.getpid()}"
    fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, f"{' '.join(g.uuid for g in candidates)}\n{owner}\n".encode())
    os.replace(making, where / str(os.getpid()))
    return fd


def _leave(folder: str, fd: int) -> None:
    (LOCK_DIR / folder / str(os.getpid())).unlink(missing_ok=True)
    os.close(fd)


def _waited_for(folder: str) -> set[str]:
    """The UUIDs of the GPUs that other processes with a place in LOCK_DIR/folder wait for; a place whose process
    died is removed."""
    where, uuids = LOCK_DIR / folder, set()
    for path in (where.iterdir() if where.is_dir() else ()):
        if path.name.startswith(".") or path.name == str(os.getpid()):
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:   # it left meanwhile
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:   # its process holds it: waiting
            uuids.update(os.read(fd, 4096).decode(errors="replace").split("\n", 1)[0].split())
        else:
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return uuids


def _wanted(folder: str, candidates: list[Gpu]) -> bool:
    """Whether another process with a place in LOCK_DIR/folder waits for one of these GPUs."""
    return not _waited_for(folder).isdisjoint(g.uuid for g in candidates)


def join_line(candidates: list[Gpu], owner: str) -> None:
    """A long job's place in the line until it has a GPU."""
    global _in_line
    _in_line = _enter(LINE, candidates, owner)


def _leave_line() -> None:
    global _in_line
    if _in_line is not None:
        _leave(LINE, _in_line)
        _in_line = None


def long_job_waiting(candidates: list[Gpu]) -> bool:
    """Whether another job in the line waits for one of these GPUs."""
    return _wanted(LINE, candidates)


def try_acquire(candidates: list[Gpu], owner: str, *, after_long: bool = False, start: float | None = None
                ) -> Slot | None:
    """One look: the lowest free candidate GPU locked, or None; with after_long, none while a long job in the line
    waits for one of them. Its wait_s counts from `start` (time.monotonic(); default now)."""
    start = time.monotonic() if start is None else start
    for gpu in ([] if after_long and long_job_waiting(candidates) else candidates):
        fd = _try_lock(gpu, owner)
        if fd is not None:
            return Slot(gpu, round(time.monotonic() - start, 3), fd,
                        dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"))
    return None


def acquire(candidates: list[Gpu], owner: str, log: logging.Logger | None = None, *, after_long: bool = False) -> Slot:
    """Wait until one of the candidate GPUs is free, lock it and return it (the lowest free index first); with
    after_long, not while a long job in the line waits for one of them."""
    if not candidates:
        raise GpuSlotsError("no GPU to take a slot on")
    start = time.monotonic()
    told = False
    waiting = _enter(WAITING, candidates, owner)   # a job starting meanwhile leaves a free one to this one
    try:
        while (slot := try_acquire(candidates, owner, after_long=after_long, start=start)) is None:
            if not told and log is not None:
                log.info("waiting for a free GPU slot among %s (%s)", [g.index for g in candidates], LOCK_DIR)
                told = True
            time.sleep(POLL_S)
    finally:
        _leave(WAITING, waiting)
    return slot


@contextmanager
def gpu_held(config: Mapping, owner: str, log: logging.Logger | None = None) -> Iterator[Slot | None]:
    """A job that times nothing but runs heavy work on a GPU (a warm-up's autotuning) holds a free GPU's lock while
    it does, waiting for one like a timing job, so that no timing job measures beside it; None where this box has
    no GPU slot. The caller points CUDA at the slot's GPU (CUDA_VISIBLE_DEVICES) for the work it starts."""
    gpus, n = _job_slots(config)
    if n == 0:
        yield None
        return
    slot = acquire(gpus[:n], owner, log)
    try:
        yield slot
    finally:
        os.close(slot.fd)


def long_places(slots: int) -> int:
    """Places in Snakemake's totals for long jobs only: one per GPU slot, for the long jobs timing, and one more, so
    that a long job made ready while short jobs fill their places and a long job times on every GPU still starts
    and joins the line."""
    return slots + 1 if slots > 0 else 0


def timing_total(slots: int) -> int:
    """Snakemake's total of the `timing` and `gpu` resources on a box with `slots` GPU slots: STAGED_PER_SLOT
    jobs per slot and the long places, or one timing job at a time where the CPU times."""
    return STAGED_PER_SLOT * slots + long_places(slots) if slots > 0 else 1


def short_total(slots: int) -> int:
    """Snakemake's total of `short_timing`, which every timing job but the long ones asks for: the places that
    are not long_places."""
    return STAGED_PER_SLOT * slots if slots > 0 else 1


def _job_slots(config: Mapping) -> tuple[list[Gpu], int]:
    """The GPUs this job sees and how many of them have slots: gpus.slots was checked against the box where
    Snakemake runs (gpu_slots.smk); a cluster job sees only its allocation, so the setting is a limit here."""
    gpus = visible_gpus()
    wanted = config.get("gpus", {}).get("slots")
    return gpus, len(gpus) if wanted is None else min(wanted, len(gpus))


# What Snakemake sets from a job's threads before its script starts (snakemake/shell.py)
THREAD_VARS = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def one_thread_where_none_claimed(environ=os.environ) -> None:
    """A GPU timing job whose slot has cores of its own claims no thread of --cores (threads 0, gpu_slots.smk),
    and Snakemake sets the thread variables from its threads: to 0, which libgomp rejects and torch reads as
    unset, so each of the job's processes would start an intra-op pool as wide as the machine on its slot's few
    cores. A timing job runs one thread, as it did when it claimed one, and as the compile warm-ups that fill its
    Inductor cache do (inductor_env.JOB_THREADS: the count is part of a cached graph's key)."""
    for var in THREAD_VARS:
        if environ.get(var) == "0":
            environ[var] = str(inductor_env.JOB_THREADS)


def is_long(rule: str, wildcards: Mapping, config: Mapping) -> bool:
    """Whether a GPU timing job is one of a run's longest, so in the line from its start: a rule of FIRST_IN_LINE,
    or a backend comparison (its numerics' config) whose every worker times algorithms as it loads (cuDNN's
    benchmark mode: implementations.times_algorithms). The conductor loads such workers one at a time, so the
    job's loading is their sum, not the slowest one's."""
    if rule in FIRST_IN_LINE:
        return True
    if rule != "eval_backend" or "numerics" not in wildcards:
        return False
    job = numerics.job_config(config, wildcards["numerics"], "study_a.backends.numerics")
    return all(implementations.times_algorithms(impl, job) for impl in config["study_a"]["backends"]["implementations"])


def stage(snakemake) -> None:
    """The first call of a timing script, before torch is imported: a job that will take a GPU slot starts
    (imports, its fork server) on the cores of the jobs that time nothing, while another job may be timing on the
    GPU it waits for; with gpus.take_free_slot_at_start, on a slot that is free now, taken at once."""
    one_thread_where_none_claimed()
    config, rule, wildcards = snakemake.config, snakemake.rule, dict(snakemake.wildcards.items())
    gpus, n = _job_slots(config)
    if measures_nothing(rule, wildcards, config, n):
        # what its resources planned: no CUDA, so its rows are not_run; and no fork server (no worker to start)
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        os.environ[fork_server.DISABLE_ENV] = "0"
        return
    if n > 0 and on_gpu(rule, wildcards, config, n):
        # torch.cuda.is_available() and device_count() from NVML, not the CUDA driver, which reads
        # CUDA_VISIBLE_DEVICES once, when it starts: an import that asks must not fix the GPUs before take()
        os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
        affinity.pin_other(n, cpu_beside(config, n))
        candidates, long = _candidates(config, rule, wildcards, n), is_long(rule, wildcards, config)
        if long:   # in line from its start: its imports take seconds that a short job would use
            join_line(candidates, _owner(rule, wildcards))
        if config.get("gpus", {}).get("take_free_slot_at_start", False):
            # a free GPU that no job waits for (acquire) nor a long job in line: its imports on the slot's quiet
            # cores instead
            waited = _waited_for(WAITING)   # one look at the folder, not one per GPU
            unwanted = [g for g in candidates if g.uuid not in waited]
            slot = try_acquire(unwanted, _owner(rule, wildcards), after_long=not long)
            if slot is not None:
                _hold(slot, gpus, config, n)
    elif cpu_beside(config, n):   # its resources gave it the CPU slot (gpu_slots.smk): its cores from the start
        affinity.pin_cpu(n)


def _candidates(config: Mapping, rule: str, wildcards: Mapping, n: int) -> list[Gpu]:
    """The GPUs a timing job may take: every slot's, or with gpus.pin_comparisons its comparison's one."""
    candidates = visible_gpus()[:n]
    if config.get("gpus", {}).get("pin_comparisons", False):
        candidates = [pinned_gpu(comparison_key(rule, wildcards), candidates)]
    return candidates


def _owner(rule: str, wildcards: Mapping) -> str:
    return f"{rule}[{','.join(f'{k}={v}' for k, v in wildcards.items())}]"


def take(snakemake, log: logging.Logger | None = None) -> Slot | None:
    """In every timing script, after its imports (stage) and before CUDA is initialised: the job's GPU slot,
    waited for while another job holds it, with CUDA_VISIBLE_DEVICES set to it and every thread of the job on
    the slot's cores; None for a job on the CPU or where there is no GPU."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise RuntimeError("gpu_slots.take() runs after CUDA was initialised: call it before any CUDA call")
    config, rule, wildcards = snakemake.config, snakemake.rule, dict(snakemake.wildcards.items())
    gpus, n = _job_slots(config)
    if n == 0 and gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # gpus.slots: 0 with device auto times on the CPU
    if not on_gpu(rule, wildcards, config, n) or n == 0:
        return None
    if _held is not None:   # taken free as the job started (stage, gpus.take_free_slot_at_start)
        if log is not None:
            log.info("GPU slot: GPU %d (%s), free when the job started (%s)", _held.gpu.index, _held.gpu.uuid,
                     _held.taken_at)
        return _held
    _hold(acquire(_candidates(config, rule, wildcards, n), _owner(rule, wildcards), log,
                  after_long=not is_long(rule, wildcards, config)), gpus, config, n)
    if log is not None:
        log.info("GPU slot: GPU %d (%s) after %.1f s", _held.gpu.index, _held.gpu.uuid, _held.wait_s)
    return _held


def _hold(slot: Slot, gpus: list[Gpu], config: Mapping, n: int) -> None:
    """This job's slot: out of the line, CUDA pointed at its GPU, every thread on the slot's cores (`gpus`: the
    job's, seen before CUDA_VISIBLE_DEVICES narrows them)."""
    global _held
    _held = slot
    _leave_line()
    if not slot.gpu.uuid.startswith("GPU-fake-"):
        os.environ["CUDA_VISIBLE_DEVICES"] = slot.gpu.uuid
    affinity.pin_timing(gpus[:n].index(slot.gpu) if slot.gpu in gpus[:n] else -1, n, cpu_beside(config, n),
                        spread_loads=config.get("gpus", {}).get("spread_loads", False))


def release(log: logging.Logger | None = None) -> None:
    """The last call of a timing script, its measuring done and its tables written: the job's GPU slot given back
    and the job, with what it started, moved onto the cores of the jobs that time nothing, so that the next job
    takes the slot while this one exits. On gpu-smoke the next job took the slot 0.7-2.1 s after a job's last line:
    its interpreter, fork server, compile pool and CUDA context ending, the slot held and idle meanwhile. Its CUDA
    context, synchronised, stays idle until the exit, as a comparison's loaded workers' contexts do while one of
    them times. Nothing is given back while a process the job started still holds the slot's lock (a worker or
    program still running may use the GPU); the exit frees it then."""
    global _held
    if _held is None:
        return
    lock = _lock_path(_held.gpu.uuid).resolve()
    holders = [pid for pid in run_guard.descendants(os.getpid()) if _holds(pid, lock)]
    if holders:
        if log is not None:
            log.warning("GPU slot kept until the job exits: processes %s it started still hold its lock", holders)
        return
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    fcntl.flock(_held.fd, fcntl.LOCK_UN)
    os.close(_held.fd)
    if log is not None:
        log.info("GPU slot: GPU %d given back", _held.gpu.index)
    _held = None
    affinity.leave_slot()


def _holds(pid: int, path: Path) -> bool:
    """Whether process `pid` has `path` open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:   # ended, or not ours to read
        return False
    for fd in fds:
        try:
            if Path(os.readlink(f"/proc/{pid}/fd/{fd}")) == path:
                return True
        except OSError:
            continue
    return False


def pin_untimed(snakemake) -> None:
    """A job that times nothing, on a machine whose GPUs have timing slots: off the timing slots' cores
    (measure/affinity.py). Timing jobs pin themselves in stage() and take()."""
    config = snakemake.config
    if is_timing_rule(snakemake.rule) or config.get("device") == "cpu":
        return
    _, n = _job_slots(config)
    if n > 0:
        affinity.pin_other(n, cpu_beside(config, n))


def held() -> Slot | None:
    """The slot this process holds (take() or hold_device()), if any."""
    return _held


def hold_device(uuid: str, log: logging.Logger | None = None) -> Slot:
    """The safety net of measure.run: a job that took no slot locks the GPU it runs on before timing."""
    global _held
    if _held is None:
        gpu = next((g for g in visible_gpus() if g.uuid.removeprefix("GPU-") == uuid.removeprefix("GPU-")),
                   Gpu(-1, uuid))
        _held = acquire([gpu], f"pid {os.getpid()}", log)
    elif not _held.gpu.uuid.startswith("GPU-fake-") and (
            _held.gpu.uuid.removeprefix("GPU-") != uuid.removeprefix("GPU-")):
        # CUDA read CUDA_VISIBLE_DEVICES before take() set it (a CUDA call among a staged job's imports)
        raise RuntimeError(f"this job holds the slot of {_held.gpu.uuid} but CUDA runs it on {uuid}: CUDA was "
                           "started before gpu_slots.take()")
    return _held


def held_fds() -> tuple[int, ...]:
    """File descriptors a launched program inherits, so that it holds the GPU slot as long as it runs."""
    return () if _held is None else (_held.fd,)


def environment_columns() -> dict:
    """The slot columns of the job's environment row."""
    return {"gpu_index": None if _held is None or _held.gpu.index < 0 else _held.gpu.index,
            "gpu_slot_wait_s": None if _held is None else _held.wait_s,
            "gpu_slot_taken_at": None if _held is None or not _held.taken_at else _held.taken_at}
