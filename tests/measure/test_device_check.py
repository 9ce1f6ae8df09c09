"""The config's device against this machine (measure/device_check.py): decided by NVML without importing torch,
and by torch's own CUDA build only where NVML sees a GPU."""
import json
import subprocess
import sys

import pytest
import torch

from abstraction_cost.measure import device_check, gpu_slots
from tests.fixtures.no_torch import env_without_torch

CHECK_WITHOUT_NVML = """
import json
from abstraction_cost.measure import device_check, gpu_slots
try:
    device_check.require({"device": "cuda"})
    cuda = None
except device_check.DeviceUnavailable as err:
    cuda = str(err)
device_check.require({"device": "auto"})
auto = {"device": "auto"}
print(json.dumps({"cuda": cuda, "auto_slots": gpu_slots.slots(auto),
                  "auto_sweep_on_gpu": gpu_slots.on_gpu("sweep", {}, auto, gpu_slots.slots(auto))}))
"""


def test_without_nvml_cuda_is_refused_naming_the_key_and_auto_is_the_cpu_without_importing_torch(tmp_path):
    env = env_without_torch(tmp_path)  # an import of torch or torchvision raises
    pynvml = tmp_path / "fake-torch" / "pynvml"   # and NVML's does too: no driver library, as on a CPU machine
    pynvml.mkdir()
    (pynvml / "__init__.py").write_text("raise ImportError('libnvidia-ml.so.1: cannot open shared object file')\n")
    env.pop(gpu_slots.FAKE_GPUS_ENV, None)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    run = subprocess.run([sys.executable, "-c", CHECK_WITHOUT_NVML], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout)
    assert found["cuda"].startswith("config key 'device' is 'cuda' but this machine has no CUDA GPU (none that NVML")
    assert "device: auto" in found["cuda"] and "device: cpu" in found["cuda"] and "nvidia-smi" in found["cuda"]
    assert found["auto_slots"] == 0 and found["auto_sweep_on_gpu"] is False   # auto: the CPU


def test_where_nvml_sees_a_gpu_torch_must_be_able_to_use_it(monkeypatch):
    monkeypatch.setattr(gpu_slots, "visible_gpus", lambda: [gpu_slots.Gpu(0, "GPU-fake-0")])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)   # e.g. a CPU-only torch on a GPU machine
    with pytest.raises(device_check.DeviceUnavailable) as err:
        device_check.require({"device": "cuda"})
    message = str(err.value)
    assert "config key 'device' is 'cuda'" in message and f"torch {torch.__version__}, built for CUDA" in message
    assert "device: auto" in message
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    device_check.require({"device": "cuda"})


def test_cpu_and_auto_are_never_refused(monkeypatch):
    monkeypatch.setattr(gpu_slots, "visible_gpus", lambda: [])
    for device in ("cpu", "auto"):
        device_check.require({"device": device})
