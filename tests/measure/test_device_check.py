"""The config's device against this machine (measure/device_check.py): decided at the start by NVML and torch's
build as its files say, without importing torch; a job's torch confirms it as the job selects its device."""
import json
import subprocess
import sys

import pytest
import torch

from abstraction_cost import torch_version
from abstraction_cost.measure import device, device_check, gpu_slots
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


CHECK_WITH_A_GPU = """
from abstraction_cost.measure import device_check
try:
    device_check.require({"device": "cuda"})
    print("passed")
except device_check.DeviceUnavailable as err:
    print(err)
"""


@pytest.mark.parametrize("build", ["13.0", None])
def test_where_nvml_sees_a_gpu_the_start_reads_torchs_cuda_build_from_its_files_without_importing_it(tmp_path, build):
    env = env_without_torch(tmp_path, **{gpu_slots.FAKE_GPUS_ENV: "1"})  # an import of torch or torchvision raises
    env.pop("CUDA_VISIBLE_DEVICES", None)
    (tmp_path / "fake-torch" / "torch" / "version.py").write_text(f"__version__ = '2.99.0'\ncuda: Optional[str] = "
                                                                   f"{build!r}\nhip: Optional[str] = None\n")
    run = subprocess.run([sys.executable, "-c", CHECK_WITH_A_GPU], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    if build:
        assert run.stdout.strip() == "passed"
    else:   # the CPU wheel on a GPU machine
        assert run.stdout.startswith("config key 'device' is 'cuda' but torch 2.99.0 is a build without CUDA")
        assert "device: auto" in run.stdout


def test_a_driver_older_than_torchs_cuda_major_is_refused_naming_both(monkeypatch):
    monkeypatch.setattr(gpu_slots, "visible_gpus", lambda: [gpu_slots.Gpu(0, "GPU-fake-0")])
    monkeypatch.setattr(torch_version, "read_cuda", lambda: "13.0")
    monkeypatch.setattr(gpu_slots, "driver_cuda_version", lambda: "12.8")
    with pytest.raises(device_check.DeviceUnavailable) as err:
        device_check.require({"device": "cuda"})
    assert "built for CUDA 13.0 and this machine's driver supports CUDA 12.8 at most" in str(err.value)
    assert "a torch built for CUDA 12" in str(err.value)
    for newer_or_unknown in ("13.0", "13.2", None):   # a minor version older than the build's runs it too
        monkeypatch.setattr(gpu_slots, "driver_cuda_version", lambda: newer_or_unknown)
        device_check.require({"device": "cuda"})


def test_a_job_whose_torch_cannot_use_the_gpu_is_refused_not_moved_to_the_cpu(monkeypatch):
    """What the start's check cannot see (NVML lists a GPU that CUDA cannot open): the job's own select refuses."""
    monkeypatch.setattr(gpu_slots, "visible_gpus", lambda: [gpu_slots.Gpu(0, "GPU-fake-0")])
    monkeypatch.setattr(torch_version, "read_cuda", lambda: "13.0")
    monkeypatch.setattr(gpu_slots, "driver_cuda_version", lambda: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(device_check.DeviceUnavailable) as err:
        device.select({"device": "cuda"})
    message = str(err.value)
    assert "config key 'device' is 'cuda'" in message and f"torch {torch.__version__}, built for CUDA" in message
    assert "device: auto" in message
    assert device.select({"device": "auto"}) == torch.device("cpu")


def test_nvml_gives_the_drivers_cuda_as_major_dot_minor(monkeypatch):
    import pynvml
    monkeypatch.delenv(gpu_slots.FAKE_GPUS_ENV, raising=False)
    monkeypatch.setattr(pynvml, "nvmlInit", lambda: None)
    monkeypatch.setattr(pynvml, "nvmlSystemGetCudaDriverVersion", lambda: 12080)
    assert gpu_slots.driver_cuda_version() == "12.8"
    monkeypatch.setattr(pynvml, "nvmlInit", lambda: (_ for _ in ()).throw(pynvml.NVMLError(9)))
    assert gpu_slots.driver_cuda_version() is None


def test_cpu_and_auto_are_never_refused(monkeypatch):
    monkeypatch.setattr(gpu_slots, "visible_gpus", lambda: [])
    for device in ("cpu", "auto"):
        device_check.require({"device": device})
