"""The weights file: a model's state in a format a C++ program reads without Python.

Little-endian, in this order:

    magic    4 bytes  b"ACWT"
    version  uint32   1
    count    uint32   number of tensors
    count times:
      name_len uint32, name (UTF-8, a torch state_dict key such as "layer1.0.conv1.weight")
      ndim     uint32, shape int64[ndim]
      data     float32[prod(shape)], C order

Every float tensor of the state dict is stored (parameters, batch-norm running mean and variance);
the integer batch-norm counters (num_batches_tracked) are not, since no backend's arithmetic reads them.
native/common/weights_file.h reads the same layout.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import torch

MAGIC = b"ACWT"
VERSION = 1


class WeightsFileError(ValueError):
    """A weights file that is not in this format, or does not fit the model."""


def save(state: dict[str, torch.Tensor], path: str | os.PathLike) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = [(k, v) for k, v in state.items() if v.is_floating_point()]
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(MAGIC + struct.pack("<II", VERSION, len(tensors)))
        for name, tensor in tensors:
            encoded = name.encode()
            f.write(struct.pack("<I", len(encoded)) + encoded)
            f.write(struct.pack("<I", tensor.dim()) + struct.pack(f"<{tensor.dim()}q", *tensor.shape))
            f.write(tensor.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4").tobytes())
    os.replace(tmp, path)


def load(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    data = Path(path).read_bytes()
    if data[:4] != MAGIC:
        raise WeightsFileError(f"{path}: not a weights file (magic {data[:4]!r}, expected {MAGIC!r})")
    version, count = struct.unpack_from("<II", data, 4)
    if version != VERSION:
        raise WeightsFileError(f"{path}: version {version}, this reader knows {VERSION}")
    offset, state = 12, {}
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, offset)
        name = data[offset + 4:offset + 4 + n].decode()
        offset += 4 + n
        (ndim,) = struct.unpack_from("<I", data, offset)
        shape = struct.unpack_from(f"<{ndim}q", data, offset + 4)
        offset += 4 + 8 * ndim
        size = int(np.prod(shape)) if ndim else 1
        if offset + 4 * size > len(data):
            raise WeightsFileError(f"{path}: truncated in tensor {name!r}")
        state[name] = torch.from_numpy(np.frombuffer(data, "<f4", size, offset).copy().reshape(shape))
        offset += 4 * size
    if offset != len(data):
        raise WeightsFileError(f"{path}: {len(data) - offset} trailing bytes")
    return state


def load_into(model: torch.nn.Module, path: str | os.PathLike) -> torch.nn.Module:
    """Load a weights file into a model, requiring every float tensor to match by name and shape."""
    state = load(path)
    expected = {k: v for k, v in model.state_dict().items() if v.is_floating_point()}
    missing, extra = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or extra:
        raise WeightsFileError(f"{path}: does not fit the model: missing {missing[:5]}, unexpected {extra[:5]}")
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise WeightsFileError(f"{path}: {name} has shape {tuple(tensor.shape)}, the model expects "
                                   f"{tuple(expected[name].shape)}")
    model.load_state_dict(state, strict=False)
    return model
