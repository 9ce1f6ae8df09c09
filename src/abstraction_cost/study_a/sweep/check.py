"""Correct before fast, for the sweep's C++ programs: each measured cell's last logits (the program writes them
with --logits-dir, native/common/sweep.h) against the eager module's on the same input, under the job's numerics
and with measure/output_check's tolerances. A cell whose logits differ becomes `wrong_output` and loses its times,
so no speed is ever reported for a model that computed something else (an AOTInductor package with dynamic shapes,
a TorchScript module, the hand-written cuDNN network).

The check runs in the job's process after the program has ended, so eager's reference never shares the device with
the program being measured; one reference per batch × resolution serves every transfer mode of that shape (the
input is the same: the pool's images repeated, normalised). The reference's input is made as uint8-pinned's is,
copied as uint8 and normalised on the device with the float32 operations the host applies for the float32 modes:
at batch 512, 1024 px the host would otherwise write a 6.4 GB float32 batch for a reference that does not fit.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from ...measure.output_check import reference
from ...models import resnet
from ..transfer import Pool, cell_input
from .cells import TIMED_COLUMNS

log = logging.getLogger(__name__)


def logits_file(directory: Path, cell: int) -> Path:
    return directory / f"cell{cell}.f32"


def check_logits(rows: list[dict], directory: Path, implementation: str, weights: str, pool: Pool, classes: int,
                 numerics: str, device: torch.device) -> list[dict]:
    """The rows, each ok cell with a logits file checked. The files stay until the job's cell store is cleared: a
    resumed job checks its kept cells again (they are kept before the check, as measured)."""
    shapes: dict[tuple[int, int], list[dict]] = {}
    for row in rows:
        if row["status"] == "ok" and logits_file(directory, row["cell"]).exists():
            shapes.setdefault((row["batch_size"], row["resolution"]), []).append(row)
    if not shapes:
        return rows
    channels = pool.manifest["channels"]
    model = resnet.load_eval(weights, channels, classes, device)
    for (batch, resolution), cells in shapes.items():
        label = f"{implementation} at input ({batch}, {channels}, {resolution}, {resolution})"
        try:
            data = cell_input(pool, batch, resolution, "uint8-pinned", device)
            data.load(pool)
            ref = reference(model, (data.to_device(),), numerics, device)
            for row in cells:
                path = logits_file(directory, row["cell"])
                logits = torch.from_numpy(np.fromfile(path, dtype=np.float32).reshape(batch, classes)).to(device)
                result = ref.check(logits)
                if not result.ok:
                    row.update(dict.fromkeys(TIMED_COLUMNS), status="wrong_output",
                               message=f"{label}: logits differ from eager's: {result.message}")
        except torch.OutOfMemoryError as err:  # eager's reference (or its float64 copy) does not fit
            for row in cells:
                row["message"] = f"output not checked: eager's reference is out of memory ({str(err).splitlines()[0]})"
        finally:
            data = ref = None
            if device.type == "cuda":
                torch.cuda.empty_cache()
    log.info("%s: logits of %d cells checked against eager's at %d shapes", implementation,
             sum(map(len, shapes.values())), len(shapes))
    return rows
