"""What a run was measured on: hardware, versions, numerics settings, git revision, config hash."""
from __future__ import annotations

import datetime as dt
import importlib.metadata
import importlib.util
import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path

import torch

from ..config import config_hash

REPO = Path(__file__).resolve().parents[3]


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(module: str) -> str | None:
    """The module's __version__ (torchvision's with its local tag, "0.29.1+cu130"), without importing a module that
    is not imported yet: importing torchvision costs ~2.8 s (it imports torch._dynamo), which jobs that only launch
    a C++ program would pay at start-up for this column. Read from the package's version.py where it has one, else
    from its distribution's metadata."""
    if module in sys.modules:
        return getattr(sys.modules[module], "__version__", None)
    try:
        spec = importlib.util.find_spec(module)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            path = Path(folder) / "version.py"
            if path.is_file():
                match = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", path.read_text(), re.MULTILINE)
                if match:
                    return match.group(1)
        return importlib.metadata.version(module)
    except (ImportError, ValueError, OSError, importlib.metadata.PackageNotFoundError):
        return None


def _driver_version() -> str | None:
    try:
        import pynvml
        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else v
    except Exception:
        return None


def capture(config: dict, device: torch.device) -> dict:
    """The static part of an environment row (before/after GPU state is added by the run)."""
    on_gpu = device.type == "cuda"
    props = torch.cuda.get_device_properties(device) if on_gpu else None
    status = _git("status", "--porcelain")
    return {
        "started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
        "hostname": socket.gethostname(),
        "device": device.type,
        "gpu_name": props.name if on_gpu else None,
        "gpu_uuid": str(props.uuid) if on_gpu else None,
        "gpu_memory_total_mib": props.total_memory / 2**20 if on_gpu else None,
        "driver_version": _driver_version() if on_gpu else None,
        "cuda_version": torch.version.cuda,
        "cudnn_version": str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else None,
        "torch_version": torch.__version__,
        "torchvision_version": _version("torchvision"),
        "triton_version": _version("triton"),
        "python_version": platform.python_version(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "git_revision": _git("rev-parse", "HEAD"),
        "git_dirty": None if status is None else bool(status),
        "config_hash": config_hash(config),
    }
