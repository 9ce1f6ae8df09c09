"""The sweep's AOTInductor package: the eval ResNet-50 through torch.export with a dynamic batch and a dynamic
resolution (height = width), compiled once by rule package_aoti_sweep and run for every cell by
`ac_libtorch sweep --model aoti`. One build for the whole grid, so the sweep table says build "dynamic" and
carries this build's time in build_s on every aoti row; nothing of it is inside a timed call.

A guard export cannot prove over the grid's ranges makes it export again with relaxed dynamic dims (_export).
A failure to export or compile is written to meta.json with status error and the message, and the sweep's aoti
rows carry it.
"""
from __future__ import annotations

import logging
from pathlib import Path

import torch
import torch.fx.experimental._config as fx_config

from ..models import resnet
from . import aoti

log = logging.getLogger(__name__)

PACKAGE = aoti.PACKAGE  # the sweep's package has aoti's layout


def package(weights_path, channels: int, classes: int, batches, resolutions, device: torch.device,
            out_dir) -> dict:
    lo_b, hi_b, lo_r, hi_r = min(batches), max(batches), min(resolutions), max(resolutions)
    meta = {"method": "export+aoti", "build": "dynamic", "device": device.type, "batches": [lo_b, hi_b],
            "resolutions": [lo_r, hi_r], "torch_version": torch.__version__}

    def export(package_path: Path) -> None:
        model = resnet.load_eval(weights_path, channels, classes, device)
        # export would specialise sizes that reach 1 inside the network (8 px is 1 px after stride 8): the
        # size-oblivious setting keeps one program for every batch and resolution in the ranges
        example = torch.zeros(2, channels, min(max(lo_r, 64), hi_r), min(max(lo_r, 64), hi_r), device=device)
        batch = torch.export.Dim("batch", min=1, max=max(hi_b, 2))
        side = torch.export.Dim("side", min=lo_r, max=max(hi_r, lo_r + 1))
        with torch.no_grad(), fx_config.patch(backed_size_oblivious=True):
            exported = _export(model, example, {0: batch, 2: side, 3: side}, meta)
            torch._inductor.aoti_compile_and_package(exported, package_path=str(package_path))

    return aoti.build(out_dir, meta, export)


def _export(model, example: torch.Tensor, ranges: dict, meta: dict):
    """torch.export over the grid's ranges (meta["shapes"] "ranges"). Where export cannot prove a guard for every
    size in them (e.g. `((side - 1) // 2) % 2 != 0`, which every power of two meets), export again with dynamic
    dims that leave such guards to run-time checks in the package (meta["shapes"] "relaxed: <the guard>"). Such a
    package is not proven over the grid (its logits can differ from eager's at large shapes), so every cell it
    measures is checked against eager's (sweep_check.py). Measured: docs/results/ (the default sweep)."""
    from torch._dynamo.exc import UserError, UserErrorType
    try:
        meta["shapes"] = "ranges"
        return torch.export.export(model, (example,), dynamic_shapes=(ranges,))
    except UserError as err:
        if err.error_type != UserErrorType.CONSTRAINT_VIOLATION:
            raise
        guard = next((line.strip(" -") for line in str(err).splitlines() if "guard" in line), str(err))
        meta["shapes"] = f"relaxed: {guard}"
        log.warning("export over the grid's ranges failed, exporting with relaxed dynamic dims: %s", guard)
        relaxed = dict.fromkeys(ranges, torch.export.Dim.DYNAMIC)
        return torch.export.export(model, (example,), dynamic_shapes=(relaxed,))


def not_run(out_dir, message: str) -> dict:
    return aoti.not_run(out_dir, message, build="dynamic")


read_meta = aoti.read_meta
