"""Start-up of a Study B block-timing job (scripts/study_b_block_timing.py): its modules do not import torchvision
(1.4-2.8 s on the machines measured, torch._dynamo with it), so a job that only writes not_run rows does not pay
for it; torchvision is imported where a model is built."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_level_imports(script: Path) -> str:
    """The script's top-level import statements, in its order."""
    tree = ast.parse(script.read_text())
    return "\n".join(ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)))


def test_block_timing_jobs_modules_leave_torchvision_unimported():
    probe = (module_level_imports(ROOT / "scripts/study_b_block_timing.py")
             + "\nimport sys\nprint('torchvision' in sys.modules)")
    assert "abstraction_cost.study_b.blocks" in probe
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "False", "importing the block-timing script's modules imported torchvision"
