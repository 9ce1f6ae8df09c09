"""AC_FAULT, the fault suite's one variable (faults.py, native/common/fault.h): items site:what@where read alike
in Python and C++, each program acting on its own sites; a malformed item is an error naming the variable and the
item, in either language."""
import subprocess

import pytest

from abstraction_cost import faults
from abstraction_cost.study_a.sweep import cells as sweep_cells
from abstraction_cost.study_a.sweep.cells import walk
from tests.fixtures.sweep_fakes import _fake_command, fake_program  # noqa: F401 (fixture)

EVERY_ITEM = ",".join(f"{site}:{what}@{'7' if site == 'cell' else 'nowhere'}"
                      for site, whats in faults.SITES.items() for what in whats)


def test_each_site_reads_its_own_items_in_order():
    environ = {"AC_FAULT": "table:kill@training,cell:oom@1,eval:segv@fp32,cell:kill@1,phase:oom@train-1"}
    assert faults.at("cell", environ) == [("oom", "1"), ("kill", "1")]
    assert faults.at("table", environ) == [("kill", "training")]
    assert faults.at("compile", environ) == [] and faults.at("cell", {}) == []


@pytest.mark.parametrize("item", ["boom@1", "cell:boom@1", "cell:oom", "cell:oom@", "cell:oom@x", "oom@1",
                                  "phase:segv@", "table-kill@training"])
def test_a_malformed_item_is_named_with_the_variable(item):
    with pytest.raises(ValueError, match=f"AC_FAULT: '{item}' is not site:what@where"):
        faults.at("table", {"AC_FAULT": f"table:kill@training,{item}"})


def test_an_injected_fault_replaces_its_sites_items_and_keeps_the_others(monkeypatch):
    monkeypatch.setenv("AC_FAULT", "eval:segv@fp32,cell:kill@0,table:kill@training")
    assert faults.replaced("cell", "cell:crash@0") == "eval:segv@fp32,table:kill@training,cell:crash@0"
    monkeypatch.delenv("AC_FAULT")
    assert faults.replaced("phase", "phase:segv@backend_eval-0") == "phase:segv@backend_eval-0"


def test_the_cpp_programs_accept_every_item_python_does_and_act_on_their_own(fake_program, monkeypatch):
    """The C++ table of sites is Python's: every site:what of faults.SITES passes the program's check (cell 7 is not
    in this grid, so none acts), and its cell items act in the sweep as in Python."""
    cells = walk([1, 2], [8], ["uint8-pinned"])
    command = _fake_command(fake_program, cells)(0, "")
    monkeypatch.setenv("AC_FAULT", EVERY_ITEM)
    every = subprocess.run(command, capture_output=True, text=True)
    assert every.returncode == 0, every.stdout + every.stderr
    monkeypatch.setenv("AC_FAULT", "table:kill@training,cell:oom@1")
    one = subprocess.run(command, capture_output=True, text=True)
    assert '"status":"oom"' in one.stdout and "injected out of memory (AC_FAULT)" in one.stdout, one.stdout
    assert sweep_cells.faults({"AC_FAULT": "table:kill@training,cell:oom@1"}) == {1: "oom"}


@pytest.mark.parametrize("item", ["cell:boom@1", "cell:oom@x", "oom@1"])
def test_the_cpp_programs_name_the_variable_and_the_bad_item(fake_program, monkeypatch, item):
    command = _fake_command(fake_program, walk([1], [8], ["uint8-pinned"]))(0, "")
    monkeypatch.setenv("AC_FAULT", f"cell:oom@0,{item}")
    bad = subprocess.run(command, capture_output=True, text=True)
    assert bad.returncode == 2 and f"AC_FAULT: '{item}' is not site:what@where" in bad.stdout, bad.stdout
