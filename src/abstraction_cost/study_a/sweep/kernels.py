"""The sweep's kernel table: the top CUDA kernels of one implementation in one numerics (study_a.sweep.numerics,
set in the process before the model is built, as in the sweep's jobs: TF32 changes which convolution kernels run)
at the kernel point (study: batch 32; its 25.166 MB copy says resolution 256), float32 pageable as the study's
PyTorch.

Each kernel's name, calls and total device time per inference, mean device time per launch, share of all kernel
time, and launch grid and block, grouped by (name, grid, block):
- Python implementations: torch.profiler over PROFILED_CALLS forwards after the warm-up (grid and block from the
  profiler's Chrome trace, where Kineto writes them); source "torch.profiler".
- C++ programs (ac_libtorch: torchscript-cpp, libtorch, aoti; ac_cudnn: cudnn, cudnn-graphs): they have no
  CUDA-kernel profiler wired in (LibTorch's own profiler is not built into ac_libtorch), so Nsight Compute
  profiles the program's own sweep of the one kernel-point cell (programs/ncu.py): the same command line the
  sweep job launches, with `warmup` warm-up calls (not profiled) and PROFILED_CALLS timed calls (profiled: the
  range native/common/sweep.h opens around them); source "ncu <version>", the row's message says what was
  profiled. Without ncu (not on PATH nor at programs/ncu.FALLBACK) the row is not_run with that reason; an ncu
  failure is an error row with ncu's last messages; bf16-autocast, which the programs lack, not_run.
Without a GPU every row is not_run (no CUDA kernels to see).
"""
from __future__ import annotations

import json
import logging
import tempfile
import traceback
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import torch

from ... import tables
from ...data.specs import spec
from ...measure import device as devices
from ...measure import numerics as nx
from ...measure.run import measured_run
from ...measure.timing import synchronize
from ...programs import ncu
from .. import aoti_dynamic
from ..transfer import Pool, cell_input
from .cells import SweepSettings, _first_line, kind
from .native_walk import sweep_command
from .python_model import PythonModel
from .summary import STUDY_TRANSFER, kept, point_resolution

log = logging.getLogger(__name__)
PROFILED_CALLS = 3


def kernels_from_trace(trace: dict, top: int) -> list[dict]:
    """Kernel events of a Chrome trace grouped by (name, grid, block), most total time first: the top ones and
    every ReLU kernel below them."""
    groups: dict[tuple, list[float]] = defaultdict(list)
    for e in trace.get("traceEvents", []):
        if e.get("cat") != "kernel" or "dur" not in e:
            continue
        args = e.get("args", {})
        grid = "({})".format(",".join(map(str, args.get("grid", [])))) if "grid" in args else None
        block = "({})".format(",".join(map(str, args.get("block", [])))) if "block" in args else None
        groups[(e["name"], grid, block)].append(float(e["dur"]))
    total = sum(sum(v) for v in groups.values())
    ranked = sorted(groups.items(), key=lambda kv: -sum(kv[1]))
    return [{"rank": rank, "kernel": name, "calls": len(d), "total_us": sum(d), "mean_us": sum(d) / len(d),
             "share": sum(d) / total if total else None, "grid": grid, "block": block, "status": "ok",
             "message": None}
            for rank, ((name, grid, block), d) in kept(ranked, top, lambda kv: kv[0][0])]


def kernels_from_ncu(groups: dict[tuple[str, str, str], dict], top: int, forwards: int, message: str) -> list[dict]:
    """Rows of sweep_kernels from ncu's groups (ncu.parse_summary), most total time first (the top ones and every
    ReLU kernel below them): calls and total_us per forward (of `forwards` profiled), mean_us per call, share of all
    profiled kernel time."""
    total = sum(g["total_us"] for g in groups.values())
    ranked = sorted(groups.items(), key=lambda kv: -kv[1]["total_us"])
    return [{"rank": rank, "kernel": name, "calls": max(1, round(g["calls"] / forwards)),
             "total_us": g["total_us"] / forwards, "mean_us": g["total_us"] / g["calls"] if g["calls"] else None,
             "share": g["total_us"] / total if total else None, "grid": grid, "block": block, "status": "ok",
             "message": message}
            for rank, ((name, grid, block), g) in kept(ranked, top, lambda kv: kv[0][0])]


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
        rows = kernels_from_trace(json.loads(path.read_text()), top)
    for r in rows:  # per inference, not per profiled window
        r["calls"] = max(1, round(r["calls"] / PROFILED_CALLS))
        r["total_us"] /= PROFILED_CALLS
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
