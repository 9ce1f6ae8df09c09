"""Backend `torchscript`: the eager ResNet-50 through torch.jit.script, saved once and evaluated from C++
(`ac_libtorch eval --model torchscript`, torch::jit::load, as the study did) and from Python (torch.jit.load).

Scripting is tried first; tracing only where scripting fails, and the artifact's metadata says which, with
scripting's error. A trace records each convolution as aten::_convolution with the tracing process's cuDNN flags
(benchmark, deterministic, enabled, allow_tf32) as constants, so a module traced under PyTorch's default
(TF32 on) would run TF32 convolutions in an fp32 job; `runtime_flag_convolutions` rewrites them into
aten::convolution, which reads the flags of the process that runs it, as a scripted module's aten::conv2d does. torch.jit is deprecated in recent torch releases (it warns) but still loads and runs; the
study measured it, so it is measured here. Inference only, as in the study.
"""
from __future__ import annotations

import io
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
                traced = torch.jit.trace(model, example)
            runtime_flag_convolutions(traced)
            # the trace's check ran the module, and its executors keep the graphs they first ran: a reload runs
            # the rewritten ones
            buffer = io.BytesIO()
            torch.jit.save(traced, buffer)
            buffer.seek(0)
            return torch.jit.load(buffer), "trace", reason


def runtime_flag_convolutions(module: torch.jit.ScriptModule) -> int:
    """Every aten::_convolution of a traced module's graphs (the trace-time flags as constants) replaced in place
    by aten::convolution on its first nine inputs (the flags read at run time); returns how many."""
    count = 0
    for sub in module.modules():
        graph = sub.graph
        for node in graph.findAllNodes("aten::_convolution"):
            replacement = graph.create("aten::convolution", list(node.inputs())[:9], 1)
            replacement.insertBefore(node)
            replacement.output().setType(node.output().type())
            node.output().replaceAllUsesWith(replacement.output())
            node.destroy()
            count += 1
        torch._C._jit_pass_dce(graph)
    return count


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
