"""torch.__version__ and torch.version.cuda without importing torch, for the workflow to read while it builds its
DAG and checks its device (importing torch takes seconds, paid at every Snakemake start).

The installed wheel's metadata cannot stand in for it: its version lacks the build's local tag (torch 2.14.1's
default Linux wheel: metadata 2.14.1, torch.__version__ 2.14.1+cu130), and a param that changed from one to the
other would rerun every job that reads it.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path


def _version_py() -> Path:
    """torch/version.py of the torch that `import torch` would load, found as the import system finds torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise ImportError("torch is not installed (./setup.sh installs it)")
    return Path(spec.origin).parent / "version.py"


def read() -> str:
    """torch.__version__ of the torch that `import torch` would load: its torch/version.py's __version__ (what
    torch/torch_version.py wraps), without running torch/__init__.py."""
    version_py = _version_py()
    found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", version_py.read_text(), re.M)
    if found is None:
        raise ImportError(f"{version_py} assigns no __version__ string")
    return found[1]


def read_cuda() -> str | None:
    """torch.version.cuda without importing torch: the CUDA version the build targets ('13.0'), None for a build
    without CUDA (the CPU wheel)."""
    version_py = _version_py()
    found = re.search(r"^cuda\s*(?::[^=]*)?=\s*(?:None|['\"]([^'\"]+)['\"])\s*$", version_py.read_text(), re.M)
    if found is None:
        raise ImportError(f"{version_py} assigns torch.version.cuda no string nor None")
    return found[1]
