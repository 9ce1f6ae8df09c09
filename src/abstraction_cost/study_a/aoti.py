"""Backend `aoti` (beyond the study): the eval ResNet-50 through torch.export and AOTInductor, packaged once per
(device, batch, resolution) and run from C++ (`ac_libtorch eval --model aoti`, AOTIModelPackageLoader): the
successor of TorchScript deployment.

The package is compiled for the device it will run on (C++ kernels on the CPU, Triton on a GPU) and for a fixed
input shape, so it is built by a rule on the measuring machine, under the config's numerics settings. A failure
to export or compile is recorded in the package directory's meta.json (status error and the message) instead of
stopping the pipeline; the eval job turns it into a row.
"""
from __future__ import annotations

import json
import os
import shutil
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

from ..models import resnet

PACKAGE = "model.pt2"
META = "meta.json"


def package(weights_path: str | os.PathLike, channels: int, classes: int, batch_size: int, resolution: int,
            device: torch.device, out_dir: str | os.PathLike) -> dict:
    """Export and compile; out_dir gets model.pt2 (when it worked) and meta.json (always)."""
    meta = {"method": "export+aoti", "device": device.type, "batch_size": batch_size, "resolution": resolution,
            "torch_version": torch.__version__}

    def export(package_path: Path) -> None:
        model = resnet.load_eval(weights_path, channels, classes, device)
        example = torch.zeros(batch_size, channels, resolution, resolution, device=device)
        with torch.no_grad():
            exported = torch.export.export(model, (example,))
            torch._inductor.aoti_compile_and_package(exported, package_path=str(package_path))

    return build(out_dir, meta, export)


def build(out_dir: str | os.PathLike, meta: dict, export: Callable[[Path], None]) -> dict:
    """export(package path) in a fresh directory beside out_dir, timed (prepare_s), which then replaces out_dir
    with meta.json: status ok, or error with the first line of the failure (a row with the reason, not a crashed
    pipeline)."""
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    started = time.perf_counter()
    try:
        export(tmp / PACKAGE)
        meta.update(status="ok", message=None)
    except Exception as err:  # export or compile failed
        meta.update(status="error", message=f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                    traceback=traceback.format_exc())
    meta["prepare_s"] = time.perf_counter() - started
    (tmp / META).write_text(json.dumps(meta, indent=1))
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(tmp, out_dir)
    return meta


def not_run(out_dir: str | os.PathLike, message: str, **extra) -> dict:
    """A package directory that records why no package was built (e.g. it needs a GPU this machine lacks)."""
    out_dir = Path(out_dir)
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    meta = {"method": "export+aoti", **extra, "status": "not_run", "message": message, "prepare_s": None,
            "torch_version": torch.__version__}
    (out_dir / META).write_text(json.dumps(meta, indent=1))
    return meta


def read_meta(out_dir: str | os.PathLike) -> dict:
    return json.loads((Path(out_dir) / META).read_text())
