"""Which device timed work runs on (whether this machine has it: device_check.py), and the numerics settings every
compared run shares."""
from __future__ import annotations

import torch

from .device_check import require, unusable


def select(config: dict) -> torch.device:
    wanted = config["device"]
    if wanted == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if wanted == "cuda":
        require(config)   # NVML's or the build's reason, where it is one of those
        raise unusable(torch)
    return torch.device("cpu")


def apply_numerics(config: dict) -> None:
    """Set TF32 and cudnn.benchmark from config['backend_flags'], so that compared runs share them; TF32 through
    measure/numerics.set_tf32, the one place that sets it."""
    from . import numerics  # numerics imports nothing of this module; imported here to keep device's imports light
    flags = config["backend_flags"]
    numerics.set_tf32(flags["tf32"])
    torch.backends.cudnn.benchmark = flags["cudnn_benchmark"]


def cuda_uuid(device: torch.device) -> str | None:
    if device.type != "cuda":
        return None
    return str(torch.cuda.get_device_properties(device).uuid)


def alloc_peak_mib(device: torch.device) -> float | None:
    """The caching allocator's peak since the last reset, in MiB; None off the GPU."""
    if device.type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(device) / 2**20


def reset_alloc_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
