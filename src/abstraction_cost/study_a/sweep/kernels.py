"""The sweep's kernel table: the top CUDA kernels of one implementation in one numerics at the kernel point
(study: batch 32; its 25.166 MB copy says resolution 256), float32 pageable as the study's PyTorch.

Each kernel's name, calls and total device time per inference, mean device time per launch, share of all kernel
time, and launch grid and block, grouped by (name, grid, block). Two ways to it:
- From the interleaved sweep (kernel_point.read_from_sweep: the point is a cell of its grid and the protocol
  profiles): the point's profiled pass (measure/profiled.py, after the cell's timed turns) returns its kernel
  groups, and the sweep job writes the rows (from_profile; source: the pass's device profiler, torch.profiler,
  LibTorch's Kineto or ac_cudnn's CUPTI subscriber). No job of its own, no process started for it.
- Else rule sweep_kernels_job, one job per (numerics, implementation), the numerics set in the process before the
  model is built (TF32 changes which convolution kernels run):
  - Python implementations: torch.profiler over PROFILED_CALLS forwards after the warm-up (grid and block from the
    profiler's Chrome trace, where Kineto writes them); source "torch.profiler".
  - C++ programs (torchscript-cpp, libtorch, aoti, cudnn, cudnn-graphs): Nsight Compute profiles the program's own
    sweep of the one kernel-point cell (programs/ncu.py): the same command line the sweep job launches, with
    `warmup` warm-up calls (not profiled) and PROFILED_CALLS timed calls (profiled: the range native/common/sweep.h
    opens around them); source "ncu <version>", the row's message says what was profiled. Without ncu (not on PATH
    nor at programs/ncu.FALLBACK) the row is not_run with that reason; an ncu failure is an error row with ncu's
    last messages; bf16-autocast, which the programs lack, not_run.
Without a GPU every row is not_run (no CUDA kernels to see).
"""
from __future__ import annotations

import json
import logging
import tempfile
import traceback
from dataclasses import replace
from pathlib import Path

import torch

from ... import tables
from ...data.specs import spec
from ...measure import device as devices
from ...measure import numerics as nx
from ...measure import profiled
from ...measure.run import measured_run
from ...measure.timing import synchronize
from ...programs import ncu
from ...tables.study_a_sweep import STUDY_TRANSFER
from .. import aoti_dynamic
from ..transfer import Pool, cell_input
from .cells import SweepSettings, _first_line, kind
from .native_walk import sweep_command
from .python_model import PythonModel
from .summary import kept, point_resolution

log = logging.getLogger(__name__)
PROFILED_CALLS = 3


def kernels_from_groups(groups: list[list], top: int, calls: int, message: str | None = None) -> list[dict]:
    """Rows of sweep_kernels from a profiled window's kernel groups (profiled.kernel_groups: name, grid, block,
    launches, total µs) over `calls` forwards, most total time first (the top ones and every ReLU kernel below
    them): calls and total_us per forward, mean_us per launch, share of all kernel time."""
    total = sum(g[4] for g in groups)
    ranked = sorted(groups, key=lambda g: -g[4])
    return [{"rank": rank, "kernel": name, "calls": max(1, round(launches / calls)), "total_us": total_us / calls,
             "mean_us": total_us / launches if launches else None, "share": total_us / total if total else None, "grid": grid,
             "block": block, "status": "ok", "message": message}
            for rank, (name, grid, block, launches, total_us) in kept(ranked, top, lambda g: g[0])]


def kernels_from_trace(trace: dict, top: int, calls: int = 1) -> list[dict]:
    """kernels_from_groups of a Chrome trace's kernel events (`calls` forwards profiled)."""
    return kernels_from_groups(profiled.kernel_groups(trace.get("traceEvents", [])), top, calls)


def from_profile(record: dict | None) -> tuple[str | None, list[dict]]:
    """(source, rows) of one implementation from its kernel-point record in the sweep (the first invocation's:
    the cell's status and its profiled pass with kernel_groups): every kernel ranked, so that kernels.top is the
    concatenation's to apply (summary.top_rows) and a new top reruns no sweep."""
    if record is None:
        return None, [{"status": "not_run", "message": "the sweep has no record of the kernel point"}]
    if record["status"] != "ok":
        return None, [{"status": record["status"], "message": f"the kernel point's cell: {record.get('message')}"}]
    profile = record.get("profile")
    if profile is None:
        return None, [{"status": "not_run", "message": "the kernel point has no profiled pass"}]
    if profile.get("status", "ok") != "ok":
        return None, [{"status": profile["status"], "message": profile.get("message")}]
    if not profile.get("kernel_groups"):
        return profile.get("device_source"), [{"status": "not_run", "message": profile.get("device_message")
                                               or "the profiled pass recorded no CUDA kernel"}]
    calls = profile["profiled_calls"]
    message = (f"the sweep's profiled pass of this cell: {calls} calls after its timed turns (first invocation), "
               "every kernel; calls and total_us per call, mean_us per kernel launch")
    groups = profile["kernel_groups"]
    return profile.get("device_source"), kernels_from_groups(groups, len(groups), calls, message)


def kernels_from_ncu(groups: dict[tuple[str, str, str], dict], top: int, forwards: int, message: str) -> list[dict]:
    """kernels_from_groups of ncu's groups (ncu.parse_summary) over `forwards` profiled forwards."""
    return kernels_from_groups([[*key, g["calls"], g["total_us"]] for key, g in groups.items()], top, forwards,
                               message)


def profile(model: PythonModel, pool: Pool, batch: int, resolution: int, device: torch.device, top: int,
            warmup: int) -> list[dict]:
    data = cell_input(pool, batch, resolution, STUDY_TRANSFER, device)
    data.load(pool)
    with torch.no_grad():
        model.build(data.to_device())
        for _ in range(max(warmup, 1)):
            model.forward(data.to_device())
        synchronize(device)
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(PROFILED_CALLS):
                model.forward(data.to_device())
            synchronize(device)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        rows = kernels_from_trace(json.loads(path.read_text()), top, PROFILED_CALLS)
    return rows or [{"status": "error", "message": "the profiler recorded no CUDA kernel"}]


def native_profile(implementation: str, numerics: str, inputs, settings: SweepSettings, config: dict,
                   device: torch.device, classes: int, resolution: int) -> tuple[str, list[dict]]:
    """(source, rows) of a C++ implementation: its sweep program for the kernel-point cell under ncu."""
    if numerics == "bf16-autocast":
        return "ncu", [{"status": "not_run", "message": nx.NO_CPP_AUTOCAST}]
    found = ncu.find()
    if found is None:
        return "ncu", [{"status": "not_run", "message": (
            f"C++ program: {Path(inputs.program).name} has no CUDA-kernel profiler wired in and Nsight Compute "
            f"(ncu) is neither on PATH nor at {ncu.FALLBACK}")}]
    if implementation == "aoti":
        meta = aoti_dynamic.read_meta(inputs.package)
        if meta["status"] != "ok":
            return "ncu", [{"status": meta["status"], "message": meta.get("message") or "no package"}]
    warmup = max(settings.warmup, 1)
    cell = replace(settings, batches=(settings.kernel_batch,), resolutions=(resolution,),
                   transfers=(STUDY_TRANSFER,), warmup=warmup, repeats=PROFILED_CALLS, cell_budget_s=None)
    pool = Pool(inputs.inputs)
    program = sweep_command(inputs.program, implementation, inputs, pool.manifest, cell, config, device, classes)
    source = f"ncu {ncu.version(found)}"
    try:
        groups = ncu.profile(found, program, log)
    except ncu.ProfileFailed as failed:
        return source, [{"status": failed.status, "message": failed.message}]
    message = (f"ncu, clocks and caches left as they are: every kernel of the {PROFILED_CALLS} timed calls of one "
               f"sweep cell (after {warmup} warm-up calls, not profiled); calls and total_us per timed call, mean_us "
               "per kernel launch")
    return source, kernels_from_ncu(groups, settings.kernel_top, PROFILED_CALLS, message)


def run(snakemake) -> None:
    inputs, out = snakemake.input, snakemake.output
    implementation, numerics = snakemake.wildcards.implementation, snakemake.wildcards.numerics
    config = nx.job_config(snakemake.config, numerics, "study_a.sweep.numerics")
    settings = SweepSettings.from_config(config)
    dataset = config["study_a"]["backends"]["dataset"]
    device = devices.select(config)
    resolution = point_resolution(settings.resolutions, settings.kernel_resolution)
    base = {"implementation": implementation, "transfer": STUDY_TRANSFER, "numerics": numerics, "device": device.type,
            "batch_size": settings.kernel_batch, "resolution": resolution, "source": "torch.profiler"}
    with measured_run(config, rule=snakemake.rule, job={"implementation": implementation, "numerics": numerics},
                      env_path=out.env, device=device) as measured:
        if device.type != "cuda":
            rows = [{"status": "not_run", "message": "no CUDA GPU: no kernels to profile"}]
        elif kind(implementation)[1] == "cpp":
            try:
                source, rows = native_profile(implementation, numerics, inputs, settings, config, device,
                                              spec(dataset, config).classes, resolution)
                base["source"] = source
            except Exception as err:
                log.error("%s: profiling under ncu failed:\n%s", implementation, traceback.format_exc())
                base["source"] = "ncu"
                rows = [{"status": "error", "message": _first_line(err)}]
        else:
            try:
                pool = Pool(inputs.inputs)
                model = PythonModel(implementation, inputs, pool.manifest["channels"],
                                    spec(dataset, config).classes, device, numerics, settings.compile_shapes)
                rows = profile(model, pool, settings.kernel_batch, resolution, device, settings.kernel_top,
                               settings.warmup)
            except torch.OutOfMemoryError as err:
                rows = [{"status": "oom", "message": _first_line(err)}]
            except Exception as err:
                log.error("%s: profiling failed:\n%s", implementation, traceback.format_exc())
                rows = [{"status": "error", "message": _first_line(err)}]
        defaults = dict.fromkeys(tables.schema("sweep_kernels"))
        table = [{**defaults, **base, "run_id": measured.run_id, **r} for r in rows]
    tables.write("sweep_kernels", table, out.table)
    log.info("%s/%s: %d kernel rows (%s)", numerics, implementation, len(table), table[0]["status"])
