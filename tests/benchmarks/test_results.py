"""benchmarks/results/: every file named <yyyy-mm-dd>_<gpu>_<benchmark>[_<variant>].json, INDEX.md current, and
every path to a result in the tree pointing at a file that exists."""
import importlib.util
import json
import re

import pytest

from tests.fixtures.repository import REPO
from tests.fixtures.repository import repository_files

spec = importlib.util.spec_from_file_location("index_results", REPO / "benchmarks" / "index_results.py")
index_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(index_results)


def test_every_result_file_follows_the_naming_and_agrees_with_its_contents():
    entries = index_results.entries()
    assert entries, "benchmarks/results/ holds no result"
    assert {e["gpu"] for e in entries} <= {"h100", "h200", "cpu"}


def test_the_index_is_the_one_the_script_writes_from_the_files():
    assert (REPO / "benchmarks/results/INDEX.md").read_text() == index_results.render(), \
        "benchmarks/results/INDEX.md is stale: run python benchmarks/index_results.py"


@pytest.mark.parametrize("name", ["cudnn_backend_h100_r32.json", "2026-11-23_h100_cudnn_backend_final.txt",
                                  "23-11-2026_h100_cudnn_backend.json", "2026-11-23_h100_no_such_benchmark.json"])
def test_a_result_named_otherwise_is_refused_naming_the_file(tmp_path, name):
    (tmp_path / name).write_text("{}")
    with pytest.raises(ValueError, match=re.escape(name)):
        index_results.entries(tmp_path)


def test_a_name_that_contradicts_the_recorded_device_or_date_is_refused(tmp_path):
    (tmp_path / "2026-11-23_cpu_sweep_overhead.json").write_text(json.dumps({"gpu": "NVIDIA H100 80GB HBM3"}))
    with pytest.raises(ValueError, match="named for 'cpu', but it records device 'NVIDIA H100 80GB HBM3'"):
        index_results.entries(tmp_path)
    (tmp_path / "2026-11-23_cpu_sweep_overhead.json").unlink()
    (tmp_path / "2026-11-24_h100_sweep_overhead.json").write_text(json.dumps({"run": "2026-11-23, code of abc"}))
    with pytest.raises(ValueError, match="named 2026-11-24, but it records run 2026-11-23"):
        index_results.entries(tmp_path)


def test_a_markdown_table_needs_its_json_beside_it(tmp_path):
    (tmp_path / "2026-11-23_h100_cudnn_backend_r32.md").write_text("| a |")
    with pytest.raises(ValueError, match="a table without its 2026-11-23_h100_cudnn_backend_r32.json"):
        index_results.entries(tmp_path)


def test_every_result_path_named_in_the_tree_exists():
    named = re.compile(r"results/(\d{4}-\d{2}-\d{2}_[A-Za-z0-9_]+\.(?:json|md))")
    old_style = re.compile(r"results/[a-z_]+_(?:h100|cpu)[A-Za-z0-9_{},*.-]*\.(?:json|md)")
    missing, stale = [], []
    for path in repository_files({".md", ".py", ".smk", ".yaml", ".h", ".cpp", ".qmd"}):
        if path.parent == REPO / "benchmarks/results":
            continue
        text = path.read_text(errors="replace")
        missing += [f"{path.relative_to(REPO)}: {n}" for n in named.findall(text)
                    if not (REPO / "benchmarks/results" / n).exists()]
        stale += [f"{path.relative_to(REPO)}: {m}" for m in old_style.findall(text)]
    assert not missing, f"paths to results that do not exist: {missing}"
    assert not stale, f"result names of the old style: {stale}"
