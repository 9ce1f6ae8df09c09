"""Whether this machine has the device the config's `device` key names: the check before any job runs
(workflow/rules/common.smk's onstart) and before a job selects its device (measure/device.select).

It imports torch only where NVML sees a GPU, to confirm that torch's own CUDA build can use it: the workflow
makes the check at every start, and importing torch takes seconds. Where NVML does not load (no driver, as on a
CPU machine) there is no GPU, as for the GPU slots (measure/gpu_slots.py).
"""
from __future__ import annotations

import os

from . import gpu_slots

FIX = ("Run on a GPU machine, or set device: auto (the GPU where there is one, else the CPU) or device: cpu, e.g. "
       "config/smoke.yaml")


class DeviceUnavailable(RuntimeError):
    """The config asks for a GPU this machine does not have."""


def require(config: dict) -> None:
    """Raise DeviceUnavailable, naming the key and the fix, where the config asks for a GPU this machine lacks."""
    if config["device"] != "cuda":
        return
    if not gpu_slots.visible_gpus():
        within = " within CUDA_VISIBLE_DEVICES" if "CUDA_VISIBLE_DEVICES" in os.environ else ""
        raise DeviceUnavailable(f"config key 'device' is 'cuda' but this machine has no CUDA GPU (none that NVML "
                                f"lists{within}; `nvidia-smi` shows whether a driver sees one). {FIX}")
    import torch
    if not torch.cuda.is_available():
        raise DeviceUnavailable(
            "config key 'device' is 'cuda' but this machine has no CUDA GPU that torch can use "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}; `nvidia-smi` shows whether a driver "
            f"sees one). {FIX}")
