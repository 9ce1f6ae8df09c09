"""The sweep's inputs and how they reach the device (Python side; native/libtorch/sweep.cpp does the same in C++).

Inputs: `pool` test images of the prepared split, resized once per resolution (bilinear, antialiased) by rule
sweep_inputs into DIR/res<R>.u8 (uint8, pool × C × R × R) with DIR/manifest.json (channels, pool, mean, std,
resolutions). A cell of batch B takes those images repeated in order: time does not depend on pixel values and
memory depends only on the shape, which is exact. A dataset that could not be obtained gives a manifest of
status 'missing' and its message only: reading it raises prepared.MissingDataset, and the sweep's tables mark
the rows it left (inputs_manifest.with_missing_inputs).

Transfer modes (how the study's question "PyTorch copies twice the bytes" is put to the test):
    float32-pageable  normalised on the host (untimed, as a data loader would), float32 copied from pageable memory
                      (what the study's PyTorch did)
    float32-pinned    the same from page-locked memory (non-blocking copy)
    uint8-pinned      uint8 from page-locked memory, normalised on the device: a quarter of the bytes
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..data import prepared
from .inputs_manifest import MANIFEST, read_manifest


def resize(images: np.ndarray, resolution: int) -> np.ndarray:
    """uint8 N×C×H×W -> uint8 N×C×R×R."""
    x = torch.from_numpy(np.ascontiguousarray(images)).float()
    if x.shape[-2:] != (resolution, resolution):
        x = F.interpolate(x, size=(resolution, resolution), mode="bilinear", antialias=True, align_corners=False)
    return x.round_().clamp_(0, 255).to(torch.uint8).numpy()


def write_inputs(prepared_dir: str | os.PathLike, pool: int, resolutions, out_dir: str | os.PathLike) -> dict:
    """Rule sweep_inputs: the pool resized to every resolution, and the manifest."""
    data = prepared.load(prepared_dir)
    count = len(data.test.labels)
    if count == 0:
        raise ValueError(f"{prepared_dir}: the test split is empty; the sweep needs images")
    images = np.array(data.test.images[:min(pool, count)])
    images = images[np.arange(pool) % len(images)]  # fewer test images than the pool: repeat them
    out = Path(out_dir)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    for r in sorted(set(resolutions)):
        resize(images, r).tofile(tmp / f"res{r}.u8")
    manifest = {"channels": int(images.shape[1]), "pool": pool, "mean": data.mean, "std": data.std,
                "resolutions": sorted(set(resolutions)), "source": str(prepared_dir)}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
    if out.exists():
        for p in out.iterdir():
            p.unlink()
        out.rmdir()
    os.replace(tmp, out)
    return manifest


class Pool:
    """The resized images of one resolution at a time (resolutions ascend, so one is kept)."""

    def __init__(self, inputs_dir: str | os.PathLike):
        self.dir = Path(inputs_dir)
        self.manifest = read_manifest(inputs_dir)
        self._resolution, self._images = None, None

    def images(self, resolution: int) -> np.ndarray:
        if resolution != self._resolution:
            m = self.manifest
            path = self.dir / f"res{resolution}.u8"
            flat = np.fromfile(path, dtype=np.uint8)
            shape = (m["pool"], m["channels"], resolution, resolution)
            if flat.size != int(np.prod(shape)):
                raise ValueError(f"{path}: {flat.size} bytes, expected {shape}")
            self._resolution, self._images = resolution, flat.reshape(shape)
        return self._images


@dataclass
class CellInput:
    """One cell's input: its device buffer (made first and zeroed, so the warm-up runs on it and a shape that is
    out of memory fails before any host memory is spent on it), then its host batch (load)."""
    batch: int
    resolution: int
    transfer: str
    device_buffer: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    host: torch.Tensor | None = None

    @property
    def uint8(self) -> bool:
        return self.transfer == "uint8-pinned"

    @property
    def nbytes(self) -> int:
        return self.device_buffer.numel() * self.device_buffer.element_size()

    def load(self, pool: Pool) -> None:
        """The host batch: the pool's images repeated in order, normalised on the host unless uint8, pinned unless
        pageable. Written into its final (pinned) buffer in place: at batch 128, 1024 px a float32 batch is 1.6 GB,
        and each temporary of `(x / 255 - mean) / std` or a pin_memory() copy would be another pass over it."""
        images = torch.from_numpy(pool.images(self.resolution))
        shape = tuple(self.device_buffer.shape)
        if self.transfer != "float32-pageable" and self.device_buffer.is_cuda:  # pinning needs CUDA
            host = torch.empty(shape, dtype=self.device_buffer.dtype, pin_memory=True)
        else:  # numpy's buffer: a large one gets transparent huge pages (madvise), far fewer page faults
            host = torch.from_numpy(np.empty(shape, dtype=np.uint8 if self.uint8 else np.float32))
        for start in range(0, self.batch, len(images)):
            n = min(len(images), self.batch - start)
            host[start:start + n].copy_(images[:n])  # uint8 -> float32 for the float modes
        if not self.uint8:
            host.div_(255.0).sub_(self.mean.cpu()).div_(self.std.cpu())
        self.host = host

    def copy(self) -> torch.Tensor:
        """The host-to-device copy alone."""
        return self.device_buffer.copy_(self.host, non_blocking=self.host.is_pinned())

    def model_input(self) -> torch.Tensor:
        """The device buffer as the model takes it: normalised on the device for uint8."""
        x = self.device_buffer
        return (x.float().div_(255.0) - self.mean) / self.std if self.uint8 else x

    def to_device(self) -> torch.Tensor:
        """One inference's input as the study timed it: the copy, then (uint8) the normalisation."""
        self.copy()
        return self.model_input()


def cell_input(pool: Pool, batch: int, resolution: int, transfer: str, device: torch.device) -> CellInput:
    """The cell's device buffer, zeroed; its host batch comes with CellInput.load."""
    m = pool.manifest
    dtype = torch.uint8 if transfer == "uint8-pinned" else torch.float32
    buffer = torch.zeros((batch, m["channels"], resolution, resolution), dtype=dtype, device=device)
    stat = lambda v: torch.tensor(v, dtype=torch.float32, device=device).view(1, -1, 1, 1)  # noqa: E731
    return CellInput(batch, resolution, transfer, buffer, stat(m["mean"]), stat(m["std"]))
