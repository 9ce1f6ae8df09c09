"""Start-up of a Study B block-timing job (scripts/study_b_block_timing.py): its modules do not import torchvision
(1.4-2.8 s on the machines measured, torch._dynamo with it), so a job that only writes not_run rows does not pay
for it; torchvision is imported where a model is built. The same check as tests/models/test_models.py's for the
sweep's network, on the script's own imports."""
from __future__ import annotations

import ast
import subprocess
import sys

from tests.fixtures.repository import REPO


def module_level_imports(script) -> str:
    """The script's top-level import statements, in its order."""
    tree = ast.parse(script.read_text())
    return "\n".join(ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)))


def test_block_timing_jobs_modules_leave_torchvision_unimported():
    imports = module_level_imports(REPO / "scripts/study_b_block_timing.py")
    assert "abstraction_cost.study_b.blocks" in imports
    code = imports + "\nimport sys\nassert 'torchvision' not in sys.modules, 'torchvision imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
