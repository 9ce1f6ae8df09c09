"""Backend `torchscript`: the eager ResNet-50 through torch.jit.script, saved once and evaluated from C++
(`ac_libtorch eval --model torchscript`, torch::jit::load, as the study did) and from Python (torch.jit.load).

Scripting is tried first; tracing only where scripting fails, and the artifact's metadata says which, with
scripting's error. torch.jit is deprecated in recent torch releases (it warns) but still loads and runs; the
study measured it, so it is measured here. Inference only, as in the study.
"""
from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path

import torch

from ..models import resnet


def make_module(model: torch.nn.Module, example: torch.Tensor) -> tuple[torch.jit.ScriptModule, str, str | None]:
    """(module, method, why not scripted): method is "script", or "trace" when scripting failed."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*torch.jit.*deprecated")
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*torch.jit.*")
        try:
            return torch.jit.script(model), "script", None
        except Exception as err:  # any scripting failure: fall back to tracing, and say why
            reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            with torch.no_grad():
                return torch.jit.trace(model, example), "trace", reason


def save(weights_path: str | os.PathLike, channels: int, classes: int, resolution: int, out_path: str | os.PathLike,
         meta_path: str | os.PathLike) -> dict:
    """Script the eager ResNet-50 with the weights file's weights, save it, and write its metadata as JSON."""
    model = resnet.load_eval(weights_path, channels, classes)
    example = torch.zeros(1, channels, resolution, resolution)
    started = time.perf_counter()
    module, method, reason = make_module(model, example)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.tmp-{os.getpid()}")
    module.save(str(tmp))
    os.replace(tmp, out_path)
    meta = {"method": method, "message": reason, "prepare_s": time.perf_counter() - started,
            "torch_version": torch.__version__}
    Path(meta_path).write_text(json.dumps(meta, indent=1))
    return meta


def load(path: str | os.PathLike, device: torch.device) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*torch.jit.*deprecated")
        return torch.jit.load(str(path), map_location=device).eval()


def read_meta(meta_path: str | os.PathLike) -> dict:
    return json.loads(Path(meta_path).read_text())
