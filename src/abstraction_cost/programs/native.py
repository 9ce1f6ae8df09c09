"""The C++ programs of native/: how they are built against the installed torch, how they are launched, and how
their JSON-lines records become rows of the pipeline's tables.

One harness for every backend: the program times its own steps (CUDA events, or a steady clock on the CPU) and
writes one record per phase with the table's column names and the phase's start and end on CLOCK_MONOTONIC,
which is the clock of Python's time.monotonic() on Linux. The launcher runs inside measured_run, so the same
NVML sampler as for `eager` samples the device while the program runs, and each phase's samples are picked out
by those timestamps. A program that exits non-zero or dies leaves its finished phases as rows and becomes one
more row with status error (or oom) and the program's own message, the signal, or its last stderr lines.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from ..measure import gpu_slots

if TYPE_CHECKING:
    import torch

REPO = Path(__file__).resolve().parents[3]
SOURCE_DIR = REPO / "native"
# one build for every run, whatever its working directory; tests that must not touch it name another
BUILD_ENV = "ABSTRACTION_COST_NATIVE_BUILD"  # another build folder (the tests: runs beside each other)
BUILD_DIR = Path(os.environ.get(BUILD_ENV, SOURCE_DIR / "build"))
# program name -> (CMake project under native/, executable); the build dir of each is native/build/<project>
PROGRAMS = {"libtorch": ("libtorch", "ac_libtorch"), "cudnn": ("cudnn", "ac_cudnn")}
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cu", ".cuh", ".txt", ".cmake")
STDERR_TAIL_LINES = 30

log = logging.getLogger(__name__)


class BuildError(RuntimeError):
    """CMake could not configure or build a program; the message holds the compiler's own words."""


def program_path(program: str = "libtorch", build_dir: Path = BUILD_DIR) -> Path:
    project, executable = PROGRAMS[program]
    return Path(build_dir) / project / executable


def sources(program: str = "libtorch", source_dir: Path = SOURCE_DIR) -> list[Path]:
    """The files a program is built from (its project and native/common): a change to any means a rebuild."""
    project, _ = PROGRAMS[program]
    files = []
    for sub in (project, "common"):
        files += [p for p in sorted((Path(source_dir) / sub).rglob("*"))
                  if p.is_file() and p.suffix in SOURCE_SUFFIXES and "build" not in p.relative_to(source_dir).parts]
    return files


# ------------------------------------------------------------------------------------------------- build
def _cuda_wheel_lib_dirs() -> list[Path]:
    """lib/ directories of the nvidia-* wheels torch was installed with (libnvrtc, libcudart, ...)."""
    dirs = []
    for entry in sys.path:
        nvidia = Path(entry) / "nvidia"
        if nvidia.is_dir():
            dirs += sorted(p for p in nvidia.glob("*/lib") if p.is_dir())
    return dirs


def _find_nvrtc() -> Path | None:
    for lib in _cuda_wheel_lib_dirs():
        found = sorted(lib.glob("libnvrtc.so.*[0-9]"))
        found = [p for p in found if "builtins" not in p.name and ".alt." not in p.name]
        if found:
            return found[0]
    return None


def _cuda_toolkit() -> Path | None:
    for candidate in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if candidate and (Path(candidate) / "bin" / "nvcc").exists():
            return Path(candidate)
    return None


def cmake_configure_command(source: Path, build: Path) -> list[str]:
    """Configure against the torch this Python imports. TorchConfig looks for a CUDA toolkit even for CPU use;
    hints are added only where needed: the toolkit's root, and nvrtc from the pip wheels when the toolkit has
    none (the CI machine's /usr/local/cuda), so the same command works on the GPU machine's full toolkit."""
    import torch  # here, not at the top: the workflow reads program_path and sources while it builds its DAG
    command = ["cmake", "-S", str(source), "-B", str(build), f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
               "-DCMAKE_BUILD_TYPE=Release"]
    if (build / "CMakeCache.txt").exists():  # an existing build dir keeps its generator (CMake refuses a change)
        generator = "Ninja" if (build / "build.ninja").exists() else "Unix Makefiles"
    else:
        generator = "Ninja" if shutil.which("ninja") else "Unix Makefiles"
    command += ["-G", generator]
    if torch.version.cuda:
        toolkit = _cuda_toolkit()
        if toolkit is not None:
            command.append(f"-DCUDA_TOOLKIT_ROOT_DIR={toolkit}")
        has_nvrtc = toolkit is not None and any(
            any((toolkit / lib).glob("libnvrtc.so*")) for lib in ("lib64", "lib"))
        nvrtc = None if has_nvrtc else _find_nvrtc()
        if nvrtc is not None:
            command.append(f"-DCUDA_nvrtc_LIBRARY={nvrtc}")
    if Path(source).name == "cudnn":
        command += _cudnn_configure_flags()
    return command


def _cudnn_configure_flags() -> list[str]:
    """native/cudnn: cuDNN and cuBLAS from the nvidia-* wheels torch came with, nvcc from the toolkit."""
    hints = [str(lib.parent) for lib in _cuda_wheel_lib_dirs()]
    flags = [f"-DAC_NVIDIA_HINTS={';'.join(hints)}"]
    toolkit = _cuda_toolkit()
    if toolkit is not None:
        flags.append(f"-DCMAKE_CUDA_COMPILER={toolkit / 'bin' / 'nvcc'}")
    return flags


def _run_logged(command: Sequence[str], logger: logging.Logger, tail: deque) -> int:
    logger.info("$ %s", " ".join(command))
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    for line in proc.stdout:
        logger.info("%s", line.rstrip("\n"))
        tail.append(line.rstrip("\n"))
    return proc.wait()


def _compiler_message(lines: Sequence[str]) -> str:
    """The first compiler or CMake error and what follows it, else the last lines of the output."""
    lines = list(lines)
    for i, line in enumerate(lines):
        if "error" in line.lower():
            return "\n".join(lines[i:i + 12])
    return "\n".join(lines[-12:])


def build(program: str, logger: logging.Logger = log, jobs: int = 2, source_dir: Path = SOURCE_DIR,
          build_dir: Path = BUILD_DIR) -> Path:
    """Configure and build one program (incrementally); every line CMake and the compiler print goes to logger.
    One build of a build tree at a time (a lock file in it): a second process waits, then finds the work done,
    where two CMake runs in one tree would break each other's configuration."""
    import torch  # as in cmake_configure_command
    project, _ = PROGRAMS[program]
    source, build_path = Path(source_dir) / project, Path(build_dir) / project
    build_path.mkdir(parents=True, exist_ok=True)
    tail: deque = deque(maxlen=400)
    logger.info("torch %s (CUDA %s), cmake prefix %s", torch.__version__, torch.version.cuda,
                torch.utils.cmake_prefix_path)
    with _one_build_at_a_time(build_path, logger):
        for step, command in (("configure", cmake_configure_command(source, build_path)),
                              ("build", ["cmake", "--build", str(build_path), "--parallel", str(max(jobs, 1))])):
            started = time.monotonic()
            code = _run_logged(command, logger, tail)
            logger.info("[%s: exit %d after %.1f s]", step, code, time.monotonic() - started)
            if code != 0:
                raise BuildError(f"{program}: cmake {step} failed (exit {code}; full output above):\n"
                                 f"{_compiler_message(tail)}")
            tail.clear()
    exe = program_path(program, build_dir)
    if not exe.is_file():
        raise BuildError(f"{program}: the build succeeded but {exe} is not there")
    return exe


@contextmanager
def _one_build_at_a_time(build_path: Path, logger: logging.Logger):
    fd = os.open(build_path / ".build.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("%s: another process is building here; waiting for it", build_path)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)   # the lock goes with the descriptor


def ensure_built(program: str = "libtorch", logger: logging.Logger = log, jobs: int = 2) -> Path:
    """The program, built first if it is missing or older than a source (for tests and interactive use; the
    pipeline's rule build_native decides the same by Snakemake's own timestamps)."""
    exe = program_path(program)
    newest = max(p.stat().st_mtime for p in sources(program))
    if exe.is_file() and exe.stat().st_mtime >= newest:
        return exe
    return build(program, logger, jobs)


# ------------------------------------------------------------------------------------------------ launch
def runtime_env() -> dict[str, str]:
    """The environment a program runs in: the CUDA wheels' libraries on LD_LIBRARY_PATH (torch's own are on
    the program's RPATH), so that the same binary finds libnvrtc and libcudart on every machine."""
    env = dict(os.environ)
    dirs = [str(d) for d in _cuda_wheel_lib_dirs()]
    if env.get("LD_LIBRARY_PATH"):
        dirs.append(env["LD_LIBRARY_PATH"])
    if dirs:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(dirs)
    return env


@dataclass
class Result:
    """What one run of a program left: its records in order, exit code and the end of its stderr."""
    command: list[str]
    returncode: int
    records: list[dict] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[dict]:
        return [r for r in self.records if r.get("kind") == kind]

    def failure(self) -> tuple[str, str] | None:
        """(status, message) when the program failed, None when it exited 0 and reported no error."""
        errors = self.of_kind("error")
        if errors:
            return errors[-1].get("status", "error"), errors[-1].get("message") or "no message"
        if self.returncode == 0:
            return None
        # an uncaught C++ exception ends in "terminate called ..." and its what() line, then its stack frames
        what = [line.strip() for line in self.stderr_tail if line.strip().startswith("what():")]
        last = what[-1] if what else (
            " | ".join(line for line in self.stderr_tail[-5:] if line.strip()) or "no output on stderr")
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return "error", f"{Path(self.command[0]).name} was killed by {name}: {last}"
        return "error", f"{Path(self.command[0]).name} exited with code {self.returncode}: {last}"


def record_of(line: str) -> dict | None:
    """The program's JSON record on a line of its stdout, or None for any other line (a library's message,
    a profiler's output)."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) and "kind" in record else None


def launch(command: Sequence, on_record: Callable[[dict], None] | None = None,
           logger: logging.Logger = log) -> Result:
    """Run a program to its end, reading its JSON-lines stdout as it is written; stderr goes to the logger."""
    command = [str(c) for c in command]
    logger.info("launching: %s", " ".join(command))
    try:
        # the program inherits CUDA_VISIBLE_DEVICES (its GPU slot) and the slot's lock: a program that outlives
        # a killed job keeps its GPU to itself until it ends
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", env=runtime_env(), pass_fds=gpu_slots.held_fds())
    except OSError as err:
        return Result(command, 127, [{"kind": "error", "status": "error",
                                      "message": f"cannot start {command[0]}: {err}"}])
    tail: deque = deque(maxlen=STDERR_TAIL_LINES)

    def drain_stderr():
        for line in proc.stderr:
            tail.append(line.rstrip("\n"))
            logger.info("[stderr] %s", line.rstrip("\n"))

    reader = threading.Thread(target=drain_stderr, name="native-stderr", daemon=True)
    reader.start()
    records = []
    for line in proc.stdout:
        line = line.strip()
        if not line:
            continue
        record = record_of(line)
        if record is None:
            logger.info("[stdout] %s", line)  # e.g. a library's own message: kept in the log, not a record
            continue
        records.append(record)
        if on_record is not None:
            on_record(record)
    code = proc.wait()
    reader.join()
    return Result(command, code, records, list(tail))


# ---------------------------------------------------------------------------------------------- commands
def _flag_number(x: float) -> str:
    return repr(float(x))


def common_flags(config: dict, device: torch.device) -> list[str]:
    """Device and backend flags: the C++ process sets what measure/device.apply_numerics sets in Python."""
    flags = config["backend_flags"]
    return ["--device", str(device), "--tf32", str(int(flags["tf32"])),
            "--cudnn-benchmark", str(int(flags["cudnn_benchmark"]))]


def shape_flags(manifest: dict) -> list[str]:
    return ["--channels", manifest["channels"], "--height", manifest["height"], "--width", manifest["width"],
            "--mean", ",".join(map(_flag_number, manifest["mean"])),
            "--std", ",".join(map(_flag_number, manifest["std"]))]


def train_command(program: Path, data_dir: str | os.PathLike, manifest: dict, weights: str | os.PathLike,
                  order: str | os.PathLike, settings, config: dict, device: torch.device,
                  save_weights: str | os.PathLike | None = None, log_steps: bool = False) -> list[str]:
    """ac_libtorch train: the flags native/libtorch/train.cpp reads, from the prepared manifest and settings."""
    data_dir = Path(data_dir)
    splits = manifest["splits"]
    command = [program, "train", *common_flags(config, device), *shape_flags(manifest),
               "--classes", len(manifest["class_names"]),
               "--train-images", data_dir / splits["train"]["images"],
               "--train-labels", data_dir / splits["train"]["labels"], "--train-count", splits["train"]["count"],
               "--test-images", data_dir / splits["test"]["images"],
               "--test-labels", data_dir / splits["test"]["labels"], "--test-count", splits["test"]["count"],
               "--weights", weights, "--order", order, "--epochs", settings.epochs,
               "--batch-size", settings.batch_size, "--eval-batch-size", settings.eval_batch_size,
               "--lr", _flag_number(settings.lr), "--momentum", _flag_number(settings.momentum),
               "--weight-decay", _flag_number(settings.weight_decay)]
    if save_weights is not None:
        command += ["--save-weights", save_weights]
    if log_steps:
        command += ["--log-steps", "1"]
    return [str(c) for c in command]


def eval_command(program: Path, model: str, input_dir: str | os.PathLike, manifest: dict, batch_size: int,
                 warmup: int, repeats: int, config: dict, device: torch.device,
                 logits_out: str | os.PathLike | None = None, weights: str | os.PathLike | None = None,
                 classes: int | None = None, module: str | os.PathLike | None = None) -> list[str]:
    """ac_libtorch eval: one model (libtorch with weights and classes; torchscript or aoti with a module file)
    on the first batch_size images of the test split of a prepared directory."""
    test = manifest["splits"]["test"]
    command = [program, "eval", "--model", model, *common_flags(config, device), *shape_flags(manifest),
               "--images", Path(input_dir) / test["images"], "--count", test["count"], "--batch-size", batch_size,
               "--warmup", warmup, "--repeats", repeats]
    if weights is not None:
        command += ["--weights", weights, "--classes", classes]
    if module is not None:
        command += ["--module", module]
    if logits_out is not None:
        command += ["--logits-out", logits_out]
    return [str(c) for c in command]


# ------------------------------------------------------------------------------------------- into tables
def mark_phase(run, name: str, record: dict) -> None:
    """Attribute the NVML samples taken between the record's start and end to phase `name` of the run's sampler."""
    run.sampler.phases[name] = (float(record["start_monotonic_s"]), float(record["end_monotonic_s"]))


def phase_measures(run, name: str, record: dict) -> dict:
    """PHASE_MEASURES of one phase: the program's allocator peak, the launcher's NVML samples."""
    return {"alloc_peak_mib": record.get("alloc_peak_mib"), **run.sampler.summary(name)}


TRAINING_FIELDS = ("loss", "accuracy", "samples", "time_s", "time_per_sample_ms", "wall_s")


def training_rows(run, result: Result) -> list[dict]:
    """Rows of the training table (without the job's keys) from a finished `ac_libtorch train`."""
    rows = []
    for record in result.of_kind("phase"):
        name = f"{record['phase']}-{record['epoch']}"
        mark_phase(run, name, record)
        rows.append({"epoch": record["epoch"], "phase": record["phase"], "status": "ok", "message": None,
                     **{k: record.get(k) for k in TRAINING_FIELDS}, **phase_measures(run, name, record)})
    failure = result.failure()
    if failure is not None:
        rows.append({"epoch": None, "phase": None, "status": failure[0], "message": failure[1]})
    return rows
