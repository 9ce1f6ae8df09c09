"""The profiled pass of a served sweep cell (the worker's `profile N`, after the cell's timed turns, so no timed call
is ever profiled), and of Study B's end-to-end variants (study_b/models/worker.py: every variant's host loop, then
every variant's device loop): where one call's time goes, per call.

Two loops of N calls on the prepared cell, each call synchronised before it starts:
- host: no profiler. `host_issue_ms` is the wall time from before the copy until the call returns (before any
  synchronisation): the time the host spends issuing the call's work; `host_cpu_ms` the thread's CPU time in that
  span (time.thread_time: below the wall time where the host waited, e.g. on a blocking copy or allocation);
  `wall_ms` the call until the device has finished (synchronised).
- device: the same calls under torch.profiler (Kineto over CUPTI's activity API; ac_libtorch: LibTorch's Kineto;
  ac_cudnn: its own subscriber to CUPTI's activity API, writing the same trace shape, native/common/chrome_trace.h).
  Per call: `device_ms` the sum of kernel durations, `memcpy_ms` the sum of copies and memsets, `kernels` the
  kernels the device ran (a CUDA graph's replayed kernels count), `launch_calls` the runtime launch calls the host
  made (cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch, ...; a graph replay is one), `device_busy_ms` the union
  of kernel and copy intervals, and `device_idle_ms` = wall_ms (host loop) - device_busy_ms: the device waiting on
  the host.
The host loop is unprofiled because the profiler's own callbacks lengthen each launch's host side.
With `groups`, the device loop's kernels also come back grouped by (name, grid, block) (`kernel_groups`): the
sweep's kernel table is read from its kernel point's profiled pass (study_a/sweep/kernels.py).

Where there is no CUDA device or the profiler yields no kernel (CUPTI missing, no permission), the device columns
are null and `device_message` says why; the host columns are measured all the same."""
from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

from .statistics import union_length

DEVICE_COLUMNS = ("device_ms", "memcpy_ms", "kernels", "launch_calls", "device_busy_ms", "device_idle_ms")
# __cudaLaunchKernel: the runtime entry point that CUDA 13's nvcc routes a <<<...>>> launch through (CUPTI's
# callback __cudaLaunchKernel_v13000), e.g. ac_cudnn's own kernels
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                "cudaLaunchCooperativeKernel", "cudaGraphLaunch", "cuGraphLaunch", "__cudaLaunchKernel")
SOURCE = "torch.profiler (Kineto/CUPTI)"
LIBTORCH_SOURCE = "LibTorch profiler (Kineto/CUPTI)"  # ac_libtorch's; ac_cudnn's record names its own (CUPTI's API)
NO_CUDA = "no CUDA device: no kernels to profile"
NO_KERNELS = ("torch.profiler recorded no CUDA kernel (CUPTI unavailable or not permitted to this process): "
              "device columns null")


GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
WINDOW_SLACK_US = (1e3, 1e7)  # a device record may start this long before the host's first event / after its last


def _in_window(events: list[dict]) -> tuple[list[dict], int]:
    """The device records within the host events' span (with slack), and how many fell outside: CUPTI can hand
    back kernel records whose timestamps are in another clock's domain after a profiler session is re-registered
    in the same process (pytorch/pytorch#192021); such a record's placement is meaningless."""
    gpu = [e for e in events if e.get("cat") in GPU_CATEGORIES and "dur" in e and "ts" in e]
    host = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in events
            if e.get("cat") not in GPU_CATEGORIES and "ts" in e and e.get("ph") == "X"]
    if not host:
        return gpu, 0
    low, high = min(h[0] for h in host) - WINDOW_SLACK_US[0], max(h[1] for h in host) + WINDOW_SLACK_US[1]
    kept = [e for e in gpu if low <= float(e["ts"]) <= high]
    return kept, len(gpu) - len(kept)


def device_summary(events: list[dict], calls: int, wall_ms: float | None) -> dict:
    """Per-call device columns from a Chrome trace's events (Kineto's categories: kernel, gpu_memcpy, gpu_memset,
    cuda_runtime / cuda_driver), `calls` profiled calls, `wall_ms` a synchronised call's median wall time."""
    gpu, dropped = _in_window(events)
    kernels = [e for e in gpu if e.get("cat") == "kernel"]
    if not kernels:
        return {**dict.fromkeys(DEVICE_COLUMNS), "device_message": NO_KERNELS}
    copies = [e for e in gpu if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    launches = sum(1 for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
                   and e.get("name") in LAUNCH_CALLS)
    spans = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in kernels + copies]   # µs
    busy = union_length(spans) / 1000 / calls
    return {"device_ms": sum(float(e["dur"]) for e in kernels) / 1000 / calls,
            "memcpy_ms": sum(float(e["dur"]) for e in copies) / 1000 / calls,
            "kernels": len(kernels) / calls, "launch_calls": launches / calls, "device_busy_ms": busy,
            "device_idle_ms": None if wall_ms is None else max(wall_ms - busy, 0.0),
            "device_message": None if not dropped else (
                f"{dropped} device records outside the profiled window left out (CUPTI timestamps)")}


def _dims(args: dict, key: str) -> str | None:
    """A kernel's launch grid or block as "(x,y,z)": Kineto writes a list (`grid`), ac_cudnn's trace one
    integer per axis (`grid x`, `grid y`, `grid z`)."""
    if key in args:
        return "({})".format(",".join(map(str, args[key])))
    axes = [args.get(f"{key} {a}") for a in "xyz"]
    return None if axes[0] is None else "({})".format(",".join(str(v) for v in axes if v is not None))


def kernel_groups(events: list[dict]) -> list[list]:
    """The profiled window's kernels as [name, grid, block, launches, total_us] per (name, grid, block), in the
    order first seen."""
    groups: dict[tuple, list] = {}
    for e in _in_window(events)[0]:
        if e.get("cat") != "kernel":
            continue
        args = e.get("args", {})
        key = (e["name"], _dims(args, "grid"), _dims(args, "block"))
        group = groups.setdefault(key, [*key, 0, 0.0])
        group[3] += 1
        group[4] += float(e["dur"])
    return list(groups.values())


def profiled_pass(call: Callable[[], None], device: torch.device, calls: int,
                  trace: Callable[[Callable[[], None], int], list[dict]] | None = None, groups: bool = False) -> dict:
    """The host loop, then the device loop, of `calls` calls of `call` (which must not synchronise); `trace`
    (tests: fake device times) returns the profiled loop's trace events; `groups`: with kernel_groups."""
    return device_loop(call, device, host_loop(call, device, calls), trace, groups)


def host_loop(call: Callable[[], None], device: torch.device, calls: int) -> dict:
    """The profiled pass's host columns: `calls` synchronised calls of `call`, no profiler. A worker holding
    several variants runs every variant's host loop before any device loop (a process stays slower once the
    profiler has run in it)."""
    if calls < 1:
        raise ValueError(f"profiled_pass: calls must be >= 1, got {calls}")
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    issue, cpu, wall = [], [], []
    for _ in range(calls):
        sync()
        t0, c0 = time.perf_counter(), time.thread_time()
        call()
        t1, c1 = time.perf_counter(), time.thread_time()
        sync()
        t2 = time.perf_counter()
        issue.append((t1 - t0) * 1000)
        cpu.append((c1 - c0) * 1000)
        wall.append((t2 - t0) * 1000)
    return {"profiled_calls": calls, "host_issue_ms": statistics.median(issue),
            "host_cpu_ms": statistics.median(cpu), "wall_ms": statistics.median(wall), "device_source": SOURCE}


def device_loop(call: Callable[[], None], device: torch.device, row: dict,
                trace: Callable[[Callable[[], None], int], list[dict]] | None = None, groups: bool = False) -> dict:
    """`row` (host_loop's) with the device columns of its `profiled_calls` calls of `call` under the profiler
    (`groups`: and its kernel_groups)."""
    calls = row["profiled_calls"]
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    if trace is None and device.type != "cuda":
        return {**row, **dict.fromkeys(DEVICE_COLUMNS), "device_message": NO_CUDA, "device_source": None}
    try:
        events = (trace or _kineto)(call if trace else lambda: (call(), sync()), calls)
    except Exception as err:  # noqa: BLE001 - a profiler that cannot start leaves the device columns null
        return {**row, **dict.fromkeys(DEVICE_COLUMNS),
                "device_message": f"torch.profiler failed: {type(err).__name__}: {str(err).splitlines()[0]}"}
    return {**row, **device_summary(events, calls, row["wall_ms"]),
            **({"kernel_groups": kernel_groups(events)} if groups else {})}


def with_trace(record: dict, groups: bool = False) -> dict:
    """A C++ program's profile record with its device columns from the Chrome trace it wrote (`trace_file`, then
    deleted; `cuda` false: a CPU trace, read but without kernels to count; `device_source` the profiler that wrote
    it: ac_cudnn's CUPTI subscriber names itself, ac_libtorch's Kineto is the default), and with `groups` its
    kernel_groups; a record without one as it is."""
    path, cuda = record.pop("trace_file", None), record.pop("cuda", True)
    if path is None:
        return record
    source = record.pop("device_source", None) or LIBTORCH_SOURCE
    try:
        events = json.loads(Path(path).read_text()).get("traceEvents", [])
        if not cuda:
            return {**record, **dict.fromkeys(DEVICE_COLUMNS), "device_message": NO_CUDA}
        summary = device_summary(events, record["profiled_calls"], record.get("wall_ms"))
        return {**record, **summary, "device_source": source,
                **({"kernel_groups": kernel_groups(events)} if groups else {})}
    except (OSError, ValueError, KeyError) as err:
        return {**record, **dict.fromkeys(DEVICE_COLUMNS),
                "device_message": f"the program's trace {path} could not be read: {type(err).__name__}: {err}"}
    finally:
        Path(path).unlink(missing_ok=True)


def _kineto(call: Callable[[], None], calls: int) -> list[dict]:
    """The Chrome trace events of `calls` calls under torch.profiler (CPU and CUDA activities)."""
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(calls):
            call()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return json.loads(path.read_text()).get("traceEvents", [])
