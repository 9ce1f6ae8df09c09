"""Inductor's cache key of one graph is the same in processes that imported modules in another order
(compile/cache_key.py): what makes the compile-cache warm-up's entries hit in the Study B jobs."""
import json
import os
import subprocess
import sys

import pytest

# A process compiles one function into the cache at argv[1]. With argv[2] == "front", a module holding `torch`
# is put first in sys.modules, as a Snakemake job's script module is: pickle.whichmodule then finds it before
# torch._utils. argv[3] == "stable" registers cache_key's reducer first. Prints the cache's hits and misses.
PROCESS = r"""
import json, sys, types
import torch
from torch._dynamo.utils import counters
if sys.argv[2] == "front":
    early = types.ModuleType("aaa_script")
    early.torch = torch
    rest = dict(sys.modules)
    sys.modules.clear()
    sys.modules["aaa_script"] = early
    sys.modules.update(rest)
if sys.argv[3] == "stable":
    from abstraction_cost.compile import cache_key
    cache_key.stable()
fn = torch.compile(lambda x: (x * 2).relu().sum(1), dynamic=False)
fn(torch.randn(8, 8))
print(json.dumps([counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"]]))
"""


def _compile(cache, order: str, registered: str) -> list[int]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", PROCESS, str(cache), order, registered], env=env, text=True,
                         capture_output=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("registered,second", [("stable", [1, 0]), ("plain", [0, 1])])
def test_a_graph_hits_the_cache_from_a_process_with_another_import_order_only_with_stable_keys(tmp_path,
                                                                                                registered, second):
    """Without cache_key.stable() the second process misses (torch's own pickling of memory formats depends on
    sys.modules' order): the test sees the fault it guards against, and the fix."""
    assert _compile(tmp_path, "plain", registered) == [0, 1]
    assert _compile(tmp_path, "front", registered) == second
