"""Whether this machine has the device the config's `device` key names: the check before any job runs
(workflow/rules/common.smk's onstart) and before a job selects its device (measure/device.select).

The check at the start imports no torch: importing torch and starting CUDA took seconds of every GPU run's start,
before its first job. It asks NVML for the GPUs and the newest CUDA the driver supports, and torch's own files for
the CUDA its build targets (torch_version.read_cuda). Where NVML does not load (no driver, as on a CPU machine)
there is no GPU, as for the GPU slots (measure/gpu_slots.py). A job confirms with torch itself as it selects its
device (`unusable`: what is left, e.g. a GPU that NVML lists but CUDA cannot open).
"""
from __future__ import annotations

import os

from .. import torch_version
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
    build = torch_version.read_cuda()
    if build is None:
        raise DeviceUnavailable(f"config key 'device' is 'cuda' but torch {torch_version.read()} is a build without "
                                f"CUDA (its torch.version.cuda is None): install a CUDA build of it. {FIX}")
    driver = gpu_slots.driver_cuda_version()
    if driver is not None and _major(driver) < _major(build):
        raise DeviceUnavailable(f"config key 'device' is 'cuda' but torch {torch_version.read()} is built for CUDA "
                                f"{build} and this machine's driver supports CUDA {driver} at most: update the "
                                f"driver, or install a torch built for CUDA {_major(driver)}. {FIX}")


def unusable(torch) -> DeviceUnavailable:
    """The error of a job whose torch cannot use a GPU that NVML and torch's build let `require` pass."""
    return DeviceUnavailable(
        "config key 'device' is 'cuda' but this machine has no CUDA GPU that torch can use "
        f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}; `nvidia-smi` shows whether a driver "
        f"sees one). {FIX}")


def _major(version: str) -> int:
    return int(version.split(".")[0])
