"""FLOPs per model and input (table flops), for a roofline: torch.utils.flop_counter.FlopCounterMode over one
forward pass in evaluation on the meta device, so no weights are allocated and no device is needed. Study A's
ResNet-50 (models/resnet.py) at every batch × resolution of its sweep and at its backend comparison's point, and
Study B's vision models at their configured batches and resolution.

FlopCounterMode counts the operators it has formulas for (convolutions, matmuls, ...: two FLOPs per
multiply-add); elementwise operators, batch norm and pooling count zero, so the figure is the model's matmul and
convolution work. A model whose forward torch cannot count (an operator without a meta kernel) is a row with null
FLOPs, status error and the reason."""
from __future__ import annotations

from typing import Callable, Iterable

import torch
from torch.utils.flop_counter import FlopCounterMode

COUNTED = "FlopCounterMode: convolutions and matmuls (2 per multiply-add); elementwise ops, norms, pooling count 0"


def count(build: Callable[[], torch.nn.Module], shape: tuple[int, ...]) -> int:
    """FLOPs of one forward pass of the model `build` makes, at input `shape`, counted on the meta device."""
    with torch.device("meta"):
        model = build().eval()
        x = torch.empty(shape)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(x)
    return int(counter.get_total_flops())


def flops_rows(cases: Iterable[tuple[str, str, Callable[[], torch.nn.Module], int, int, int]],
               run_id: str) -> list[dict]:
    """One row per (study, model, builder, channels, batch, resolution)."""
    rows = []
    for study, model, build, channels, batch, resolution in cases:
        row = {"run_id": run_id, "study": study, "model": model, "batch_size": batch, "resolution": resolution,
               "flops": None, "flops_per_sample": None, "status": "ok", "message": COUNTED}
        try:
            flops = count(build, (batch, channels, resolution, resolution))
            row.update(flops=flops, flops_per_sample=flops / batch)
        except Exception as err:  # noqa: BLE001 - any operator torch cannot count is a row with its reason
            row.update(status="error", message=f"torch could not count this forward: {type(err).__name__}: {err}")
        rows.append(row)
    return rows


def cases(config: dict) -> list[tuple[str, str, Callable[[], torch.nn.Module], int, int, int]]:
    """What rule flops counts under this config: Study A's ResNet-50 (study_a.backends.dataset's channels and
    classes) at every sweep batch × resolution and at the backend comparison's point; each Study B vision model at
    each of its pair's batch sizes and study_b.models.resolution (a model on both pairs once)."""
    from ..study_a.sweep.cells import SweepSettings
    from ..study_b.models import vision as vision_models
    from ..data.specs import spec
    from ..models import blocks, resnet

    backends = config["study_a"]["backends"]
    dataset = spec(backends["dataset"], config)
    sweep = SweepSettings.from_config(config)
    points = sorted({(b, r) for b in sweep.batches for r in sweep.resolutions}
                    | {(backends["batch_size"], backends["resolution"])})
    found = {("study_a", "resnet50", b, r): ("study_a", "resnet50",
                                            lambda: resnet.resnet50(dataset.channels, dataset.classes),
                                            dataset.channels, b, r) for b, r in points}
    vision = config["study_b"]["models"]
    for pair, models in vision["models"].items():
        for name in models:
            for batch in vision_models.batch_sizes(config, pair):
                found[("study_b", name, batch, vision["resolution"])] = (
                    "study_b", name, lambda name=name: blocks.build(name, config["seed"]), 3, batch,
                    vision["resolution"])
    return list(found.values())
