"""The workflow's TORCH_VERSION (a param: a different torch reruns the jobs that read it) is torch.__version__ to
the character, read without importing torch."""
import subprocess
import sys

import torch

from abstraction_cost import torch_version
from tests.fixtures.no_torch import env_without_torch


def test_the_version_read_without_importing_torch_is_torch_own():
    # the local tag included (2.14.1+cu130, where the wheel's metadata says 2.14.1), so existing results stand
    assert torch_version.read() == torch.__version__


def test_reading_the_version_imports_no_torch():
    code = "import sys; from abstraction_cost import torch_version; torch_version.read(); print(sorted(sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "'torch'" not in run.stdout and "'torchvision'" not in run.stdout


def test_the_version_is_that_of_the_torch_the_import_system_finds(tmp_path):
    # a fake torch first on the path is the one `import torch` would load, so its version.py is read
    code = "from abstraction_cost import torch_version; print(torch_version.read())"
    (tmp_path / "v").mkdir()
    env = env_without_torch(tmp_path / "v")
    (tmp_path / "v" / "fake-torch" / "torch" / "version.py").write_text("__version__ = '0.0.0+fake'\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert run.stdout.strip() == "0.0.0+fake"
