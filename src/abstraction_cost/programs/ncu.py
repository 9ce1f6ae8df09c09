"""Nsight Compute (ncu) for the sweep's kernel table: the top CUDA kernels of a C++ program (ac_libtorch,
ac_cudnn), which has no CUDA-kernel profiler of its own wired in.

The program runs its own sweep for one cell (study_a/sweep's sweep_command) under

    ncu --csv --print-summary per-kernel --metrics gpu__time_duration.sum --profile-from-start off
        --clock-control none --cache-control none <program sweep flags>

- --profile-from-start off: only the timed forwards are profiled, the range native/common/sweep.h opens with
  cudaProfilerStart/Stop around them; start-up, the input's preparation and the warm-up calls (with cuDNN's
  algorithm search, when benchmark mode is on) are not.
- --clock-control none --cache-control none: ncu leaves the GPU's clocks as they are (it would otherwise lock
  them to base) and does not flush the caches before each kernel, so the times are those of a normal run, as
  torch.profiler's are. ncu still serialises the kernels, one at a time.

ncu's per-kernel summary (a CSV after its "==PROF==" lines on stdout) has one line per (kernel, block, grid) with
its invocations and the metric's average; units and thousands separators as ncu prints them.
"""
from __future__ import annotations

import csv
import logging
import os
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

from ..measure import gpu_slots
from . import native

log = logging.getLogger(__name__)

FALLBACK = Path("/usr/local/cuda/bin/ncu")  # where the CUDA toolkit puts it when it is not on PATH
METRIC = "gpu__time_duration.sum"
FLAGS = ("--csv", "--print-summary", "per-kernel", "--metrics", METRIC, "--profile-from-start", "off",
         "--clock-control", "none", "--cache-control", "none")
TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6,
         "second": 1e6}
HEADER_START = '"Process ID"'
TAIL_LINES = 5


class NcuError(RuntimeError):
    """ncu ran but its output cannot be read as the per-kernel summary."""


class ProfileFailed(RuntimeError):
    """The program's run under ncu gave no kernels: `status` (error, oom) and `message` say why."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def find() -> Path | None:
    """ncu on PATH, else the CUDA toolkit's; None when neither is there."""
    found = shutil.which("ncu")
    if found:
        return Path(found)
    return FALLBACK if FALLBACK.is_file() and os.access(FALLBACK, os.X_OK) else None


def version(tool: Path) -> str:
    """ncu's version, e.g. "2025.3.0.0" from its "Version 2025.3.0.0 (build ...)" line."""
    out = subprocess.run([str(tool), "--version"], capture_output=True, text=True, errors="replace", timeout=60)
    text = out.stdout + out.stderr
    match = re.search(r"Version\s+(\S+)", text)
    if match:
        return match.group(1)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "unknown version"


def command(tool: Path, program_command: list[str]) -> list[str]:
    return [str(tool), *FLAGS, *map(str, program_command)]


def _triple(text: str, column: str) -> str:
    """ncu's "(128, 1, 1)" as torch.profiler's rows write it, "(128,1,1)"."""
    parts = [p.strip() for p in text.strip().strip("()").split(",")]
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise NcuError(f"ncu summary: {column} {text!r} is not (x, y, z)")
    return "({})".format(",".join(parts))


def _number(text: str, column: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        raise NcuError(f"ncu summary: {column} {text!r} is not a number") from None


def parse_summary(text: str) -> dict[tuple[str, str, str], dict]:
    """{(kernel, grid, block): {"calls", "total_us"}} from ncu's per-kernel summary (the METRIC lines), summed
    over processes and devices."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(HEADER_START)), None)
    if start is None:
        raise NcuError("ncu printed no per-kernel summary (no CSV header line starting with "
                       f"{HEADER_START})")
    body = [lines[start]] + [line for line in lines[start + 1:] if line.startswith('"')]
    groups: dict[tuple[str, str, str], dict] = defaultdict(lambda: {"calls": 0, "total_us": 0.0})
    for row in csv.DictReader(body):
        if row.get("Metric Name") != METRIC:
            continue
        unit = (row.get("Metric Unit") or "").strip()
        if unit not in TO_US:
            raise NcuError(f"ncu summary: unit {unit!r} of {METRIC} is not one of {sorted(TO_US)}")
        calls = int(_number(row["Invocations"], "Invocations"))
        key = (row["Kernel Name"], _triple(row["Grid Size"], "Grid Size"), _triple(row["Block Size"], "Block Size"))
        groups[key]["calls"] += calls
        groups[key]["total_us"] += _number(row["Average"], "Average") * TO_US[unit] * calls
    return dict(groups)


def _records(stdout: str) -> list[dict]:
    """The program's JSON-lines records among ncu's lines on the same stdout."""
    return [r for r in map(native.record_of, stdout.splitlines()) if r is not None]


def _tool_lines(stdout: str, stderr: str) -> str:
    """ncu's own complaints (==ERROR==, ==WARNING==), else the end of stderr: the reason a run failed."""
    flagged = [line.strip() for line in (stdout + "\n" + stderr).splitlines()
               if line.startswith(("==ERROR==", "==WARNING=="))]
    tail = flagged or [line.strip() for line in stderr.splitlines() if line.strip()]
    return " | ".join(tail[-TAIL_LINES:]) or "no output on stderr"


def profile(tool: Path, program_command: list[str], logger: logging.Logger = log) -> dict[tuple[str, str, str], dict]:
    """The program's sweep of one cell under ncu: its timed calls' kernels, grouped as parse_summary groups them;
    ProfileFailed when there are none."""
    cmd = command(tool, program_command)
    logger.info("profiling: %s", " ".join(cmd))
    # as native.launch: the program inherits this job's GPU slot (CUDA_VISIBLE_DEVICES) and the slot's lock
    done = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=native.runtime_env(),
                          pass_fds=gpu_slots.held_fds())
    for line in done.stderr.splitlines():
        logger.info("[stderr] %s", line)
    for line in done.stdout.splitlines():
        if line.startswith("=="):
            logger.info("[ncu] %s", line)
    records = _records(done.stdout)
    cells = [r for r in records if r["kind"] == "cell"]
    errors = [r for r in records if r["kind"] == "error"]
    if errors:  # the program's own report of why it stopped (bad flag, no GPU)
        raise ProfileFailed(errors[-1].get("status", "error"),
                            f"under ncu, {Path(program_command[0]).name}: {errors[-1].get('message')}")
    if cells and cells[-1]["status"] != "ok":
        raise ProfileFailed(cells[-1]["status"], f"under ncu, the kernel point's cell: {cells[-1].get('message')}")
    if done.returncode != 0 or not any(r["kind"] == "sweep_done" for r in records):
        raise ProfileFailed("error", f"ncu exited with code {done.returncode}: {_tool_lines(done.stdout, done.stderr)}")
    try:
        groups = parse_summary(done.stdout)
    except NcuError as err:
        raise ProfileFailed("error", f"{err}: {_tool_lines(done.stdout, done.stderr)}") from None
    if not groups:
        raise ProfileFailed("error", "ncu profiled no kernel in the timed calls' range: "
                                     f"{_tool_lines(done.stdout, done.stderr)}")
    return groups
