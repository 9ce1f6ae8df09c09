"""A served Python worker's modules leave polars unimported. A job starts all its workers at once on its slot's cores
(the comparison's 24, the sweep's 30), each forked from the fork server with torch imported, and polars was most of
what a worker still imported (about 0.4 of 0.5 s on a 2-core machine); only the jobs read and write tables."""
from __future__ import annotations

import subprocess
import sys

import pytest

from abstraction_cost.programs import fork_server


@pytest.mark.parametrize("module", ["abstraction_cost.study_a.sweep.worker", "abstraction_cost.study_b.models.worker"])
def test_a_workers_modules_leave_polars_unimported(module):
    code = (f"import sys\nimport {', '.join(fork_server.PRELOAD)}\nimport {module}\n"
            "assert 'polars' not in sys.modules, 'polars imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
