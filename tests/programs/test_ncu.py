"""Nsight Compute's per-kernel summary (programs/ncu.py), read from a real one (tests/fixtures/ncu_summary.csv, ncu on
an H100, a Python process's 2 ResNet-50 forwards at batch 8): grouping by (name, grid, block), calls = Invocations,
units, thousands separators, and what it cannot read named."""
import pytest

from abstraction_cost.programs import ncu
from tests.fixtures.repository import REPO

FIXTURE = REPO / "tests/fixtures/ncu_summary.csv"


def test_real_summary_is_read_per_name_grid_block():
    groups = ncu.parse_summary(FIXTURE.read_text())
    assert len(groups) == 53  # the fixture's 53 lines, each its own (name, grid, block)
    assert sum(g["calls"] for g in groups.values()) == 433
    assert sum(g["total_us"] for g in groups.values()) == pytest.approx(2895.67976)
    bn = [(grid, block, g) for (name, grid, block), g in groups.items() if name.startswith("void cudnn::bn_fw_inf")]
    # same kernel, same grid (64,8,1), two blocks: two groups; "5,957.82"-style numbers read with their separators
    assert sorted((grid, block) for grid, block, _ in bn if grid == "(64,8,1)") == [("(64,8,1)", "(128,1,1)"),
                                                                                  ("(64,8,1)", "(512,1,1)")]
    relu = {grid: g for (name, grid, block), g in groups.items() if "launch_clamp_scalar" in name}
    assert {grid: g["calls"] for grid, g in relu.items()} == {"(16,1,1)": 10, "(32,1,1)": 22, "(64,1,1)": 22,
                                                             "(128,1,1)": 26, "(256,1,1)": 10, "(512,1,1)": 8}
    assert relu["(16,1,1)"]["total_us"] == pytest.approx(10 * 3.1136)


def _summary(lines: list[str]) -> str:
    header = ('"Process ID","Process Name","Host Name","Kernel Name","Block Size","Grid Size","Device","CC",'
              '"Invocations","Section Name","Metric Name","Metric Unit","Minimum","Maximum","Average"')
    return "\n".join(["==PROF== Connected to process 1 (/bin/prog)", '{"kind":"sweep_done","cells":1}', header,
                      *lines, "==PROF== Disconnected from process 1"])


def _line(pid: str, name: str, invocations: str, unit: str, average: str, metric: str = ncu.METRIC) -> str:
    return (f'"{pid}","prog","host","{name}","(256, 1, 1)","(1024, 2, 1)","0","9.0","{invocations}",'
            f'"Command line profiler metrics","{metric}","{unit}","{average}","{average}","{average}"')


@pytest.mark.parametrize("unit,average,us", [("ns", "1,500.00", 1.5), ("nsecond", "1,500.00", 1.5),
                                             ("us", "1.5", 1.5), ("usecond", "1.5", 1.5), ("ms", "0.0015", 1.5),
                                             ("msecond", "0.0015", 1.5)])
def test_units_and_separators(unit, average, us):
    groups = ncu.parse_summary(_summary([_line("1", "relu_kernel", "1,000", unit, average)]))
    key = ("relu_kernel", "(1024,2,1)", "(256,1,1)")
    assert groups == {key: {"calls": 1000, "total_us": pytest.approx(1000 * us)}}


def test_one_kernel_in_two_processes_is_one_group_and_other_metrics_are_ignored():
    groups = ncu.parse_summary(_summary([_line("1", "k", "2", "us", "3"), _line("2", "k", "4", "ns", "6,000"),
                                         _line("1", "k", "9", "%", "50", metric="sm__throughput.avg.pct")]))
    assert groups == {("k", "(1024,2,1)", "(256,1,1)"): {"calls": 6, "total_us": pytest.approx(2 * 3 + 4 * 6)}}


@pytest.mark.parametrize("text,words", [
    ("==PROF== Disconnected from process 1\n", "no per-kernel summary"),
    (_summary([_line("1", "k", "1", "cycle", "3")]), "unit 'cycle'"),
    (_summary([_line("1", "k", "1", "ns", "n/a")]), "Average 'n/a' is not a number"),
])
def test_unreadable_summary_says_why(text, words):
    with pytest.raises(ncu.NcuError, match=words):
        ncu.parse_summary(text)
