"""Start-up of the jobs that only launch a C++ program (the sweep's libtorch, torchscript-cpp, aoti and cudnn jobs):
they never build a torchvision model, so they do not import torchvision (~2.8 s here: it imports torch._dynamo),
and their environment row still names torchvision's exact version."""
from __future__ import annotations

import json
import subprocess
import sys

import torchvision

PROBE = """
import json, sys, torch
from abstraction_cost.study_a.sweep import serial as sweep
from abstraction_cost.measure import environment
row = environment.capture({"seed": 0}, torch.device("cpu"))
print(json.dumps({"torchvision_imported": "torchvision" in sys.modules, "version": row["torchvision_version"]}))
"""


def test_a_cpp_sweep_jobs_modules_and_environment_row_leave_torchvision_unimported():
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["torchvision_imported"] is False
    assert seen["version"] == torchvision.__version__  # local tag included, as the imported module says

