"""The sweep's cells and settings: walk order, the oom-skip rule, config checks, repeat budgets, the fault
hook's parsing and the jobs per compile mode."""
from __future__ import annotations

import re

import pytest

from abstraction_cost.study_a.sweep import cells as sweep_cells
from abstraction_cost.study_a.sweep.cells import Cell, OomTracker, SweepConfigError, walk

from tests.fixtures.sweep_fakes import SKIPPED_B2


def _sweep_config(**overrides) -> dict:
    s = {"batches": [1, 2], "resolutions": [8, 16], "warmup": 0, "repeats": 2,
         "transfers": list(sweep_cells.TRANSFERS), "implementations": ["eager", "libtorch"], "numerics": ["fp32"],
         "compile_modes": [],
         "pool": 2, "require_gpu": False, "kernels": {"batch_size": 2, "resolution": 16, "top": 5}}
    s.update(overrides)
    return s


def test_walk_is_resolution_then_batch_then_transfer_as_given():
    cells = walk([4, 1, 2], [16, 8], ["uint8-pinned", "float32-pageable"])
    assert [(c.resolution, c.batch) for c in cells[::2]] == [(8, 1), (8, 2), (8, 4), (16, 1), (16, 2), (16, 4)]
    assert [c.transfer for c in cells] == ["uint8-pinned", "float32-pageable"] * 6
    assert [(c.resolution, c.batch) for c in cells[1::2]] == [(c.resolution, c.batch) for c in cells[::2]]
    assert [c.index for c in cells] == list(range(12))


def test_oom_tracker_skips_larger_batches_at_that_resolution_in_modes_needing_as_much_device_memory():
    t = OomTracker()
    t.add(Cell(1, 2, 8, "uint8-pinned"))
    assert t.skip_message(Cell(2, 4, 8, "uint8-pinned")) == SKIPPED_B2
    assert t.skip_message(Cell(0, 1, 8, "uint8-pinned")) is None
    # a float32 batch needs less device memory than a uint8 one (no uint8 copy beside it): still tried
    assert t.skip_message(Cell(3, 4, 8, "float32-pageable")) is None
    assert t.skip_message(Cell(5, 4, 16, "uint8-pinned")) is None
    assert t.flag() == "8:2:uint8-pinned"


def test_oom_tracker_skips_the_same_shape_in_a_later_mode_needing_as_much_device_memory():
    t = OomTracker()
    t.add(Cell(0, 2, 8, "float32-pageable"))
    assert t.skip_message(Cell(1, 2, 8, "float32-pinned")) == f"{SKIPPED_B2} in float32-pageable"
    assert t.skip_message(Cell(2, 2, 8, "uint8-pinned")) == f"{SKIPPED_B2} in float32-pageable"
    assert t.skip_message(Cell(4, 4, 8, "float32-pinned")) == SKIPPED_B2
    assert t.skip_message(Cell(5, 4, 8, "uint8-pinned")) == SKIPPED_B2
    assert t.skip_message(Cell(0, 2, 8, "float32-pageable")) is None  # the oom cell itself is measured, not skipped
    assert t.skip_message(Cell(6, 1, 8, "float32-pinned")) is None


@pytest.mark.parametrize("key,value,words", [
    ("batches", [8, 0], "'study_a.sweep.batches': 0 is not a positive integer"),
    ("resolutions", [8, 2.5], "'study_a.sweep.resolutions': 2.5 is not a positive integer"),
    ("batches", [True], "'study_a.sweep.batches': True is not a positive integer"),
    ("repeats", -1, "'study_a.sweep.repeats'"),
    ("transfers", ["float16-pinned"], "'study_a.sweep.transfers': 'float16-pinned' is not one of"),
    ("transfers", ["uint8-pinned", "uint8-pinned"], "'study_a.sweep.transfers': 'uint8-pinned' is twice in the list"),
    ("implementations", ["tensorrt"], "'study_a.sweep.implementations': 'tensorrt' is not built here"),
    ("implementations", ["compiled"], "'study_a.sweep.compile_modes'"),
    ("numerics", ["fp32", "fp16"], "'study_a.sweep.numerics': 'fp16' is not one of"),
    ("numerics", [], "'study_a.sweep.numerics': need a non-empty list"),
    ("numerics", ["tf32", "tf32"], "'study_a.sweep.numerics': 'tf32' is twice in the list"),
    ("numerics", "fp32", "'study_a.sweep.numerics': need a non-empty list"),
    ("compile_shapes", "automatic", "'study_a.sweep.compile_shapes': 'automatic' is not one of"),
    ("cell_budget_s", 0, "'study_a.sweep.cell_budget_s': 0 is not a positive number"),
    ("cell_budget_s", "3s", "'study_a.sweep.cell_budget_s': '3s' is not a positive number"),
    ("kernels", {"batch_size": 2, "resolution": 16, "top": 5, "numerics": ["tf32"]},
     "'study_a.sweep.kernels.numerics': 'tf32' is not one of ['fp32']"),
    ("kernels", {"batch_size": 2, "resolution": 16, "top": 5, "numerics": []},
     "'study_a.sweep.kernels.numerics': need a non-empty list of ['fp32']"),
])
def test_bad_sweep_config_is_refused_naming_the_key(key, value, words):
    with pytest.raises(SweepConfigError, match=re.escape(words)):
        sweep_cells.check(_sweep_config(**{key: value}))


def test_kernel_table_numerics_default_to_the_sweeps_and_may_be_fewer():
    """The kernel table may profile fewer numerics than the sweep walks (the default config: fp32, the study's),
    one kernel job fewer per implementation and numerics left out."""
    both = {"study_a": {"sweep": _sweep_config(numerics=["fp32", "tf32"])}}
    assert sweep_cells.SweepSettings.from_config(both).kernel_numerics == ("fp32", "tf32")
    both["study_a"]["sweep"]["kernels"]["numerics"] = ["tf32"]
    settings = sweep_cells.SweepSettings.from_config(both)
    assert (settings.numerics, settings.kernel_numerics) == (("fp32", "tf32"), ("tf32",))


@pytest.mark.parametrize("done,elapsed,budget,more", [
    (9, 100.0, None, True),  # no budget: every repeat, however long
    (10, 0.0, None, False),
    (2, 100.0, 1.0, True),  # a budget still leaves three calls
    (3, 0.5, 1.0, True),
    (3, 1.0, 1.0, False),
    (10, 0.0, 1.0, False),  # and never more than repeats
])
def test_more_repeats_stops_a_cell_at_its_budget_after_three_calls(done, elapsed, budget, more):
    assert sweep_cells.more_repeats(done, elapsed, 10, budget) is more


def test_timed_columns_are_the_ones_a_cell_without_a_time_clears():
    assert set(sweep_cells.timed_columns(2, [1.0, 2.0], [0.5, 0.6])) == {"repeats", *sweep_cells.TIMED_COLUMNS}


def test_faults_parse_and_reject():
    assert sweep_cells.faults({"AC_FAULT": "cell:oom@1,cell:crash@3"}) == {1: "oom", 3: "crash"}
    assert sweep_cells.faults({}) == {}
    with pytest.raises(ValueError, match="AC_FAULT"):
        sweep_cells.faults({"AC_FAULT": "cell:boom@1"})


def test_jobs_expand_compiled_per_mode():
    config = {"study_a": {"sweep": _sweep_config(implementations=["eager", "compiled"],
                                                 compile_modes=["default", "max-autotune"])}}
    assert sweep_cells.SweepSettings.from_config(config).jobs() == ["eager", "compiled-default",
                                                                    "compiled-max-autotune"]
