"""The sweep's compile warm-up on the CPU (study_a/sweep/compile_warm_up.py): which cells it builds, its workers
told to load them one after another and nothing else, a worker that dies failing only its own entry, and the job
that reads its manifest walking its first invocations together. Its GPU half (the job's workers hit what it
compiled) is tests/study_a/sweep/test_gpu.py's."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from abstraction_cost.measure import device as devices
from abstraction_cost.study_a.sweep import compile_warm_up, interleaved
from abstraction_cost.study_a.sweep.cells import PROTOCOL_DEFAULTS, Protocol, walk

from tests.fixtures.sweep_jobs import make_pool
from tests.study_a.sweep.test_interleaved import FAKE_WORKER, _settings

CONFIG = {"backend_flags": {"cudnn_benchmark": False}, "study_a": {"cudnn": {"algo": "heuristic"}}}


def test_it_builds_each_shape_once_at_its_first_cell_and_only_shapes_the_first_invocations_hold_together():
    cells = walk([1, 2, 64], [8, 16], ["float32-pageable", "uint8-pinned"])
    protocol = Protocol(**{**PROTOCOL_DEFAULTS, "invocations": 3, "interleave_max_pixels": 3 * 2 * 16 * 16})
    warmed = compile_warm_up.warmed_cells(cells, protocol)
    # per resolution: batch 1 and 2 fit three times (3 × 2 × 16² is the bound), batch 64 does not; a shape's uint8
    # cell shares its build
    assert [(c.batch, c.resolution, c.transfer) for c in warmed] == [
        (1, 8, "float32-pageable"), (2, 8, "float32-pageable"), (1, 16, "float32-pageable"),
        (2, 16, "float32-pageable")]
    assert [c.index for c in warmed] == [0, 2, 6, 8]


def test_only_the_compile_entries_are_warmed():
    assert compile_warm_up.entries(["eager", "compiled-default", "aoti", "compiled-static-max-autotune",
                                    "cudnn"]) == ["compiled-default", "compiled-static-max-autotune"]


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    log = tmp_path / "commands.log"
    return SimpleNamespace(command_for=lambda die: lambda impl: [sys.executable, str(script), impl, str(log),
                                                                 str(die.get(impl, -1))], log=log)


def test_each_worker_loads_the_cells_in_order_and_is_timed_nowhere(fake):
    cells = walk([1, 2], [8], ["float32-pageable"])
    builds = compile_warm_up.warm(["compiled-default", "compiled-reduce-overhead"], fake.command_for({}), cells)
    lines = fake.log.read_text().splitlines()
    for impl in ("compiled-default", "compiled-reduce-overhead"):
        assert [line.split(" ", 1)[1] for line in lines if line.split()[0] == impl] == ["load 0", "load 1"]
        assert [(b["cell"], b["status"]) for b in builds[impl]] == [(0, "ok"), (1, "ok")]


def test_a_worker_that_dies_fails_only_its_own_remaining_cells(fake):
    cells = walk([1, 2, 4], [8], ["float32-pageable"])
    builds = compile_warm_up.warm(["compiled-default", "compiled-reduce-overhead"],
                                  fake.command_for({"compiled-default": 1}), cells)
    dead = builds["compiled-default"]
    assert [(b["cell"], b["status"]) for b in dead] == [(0, "ok"), (1, "error"), (2, "error")]
    assert "3" in dead[1]["message"] and dead[1]["build_s"] is None   # its exit status, said
    assert [b["status"] for b in builds["compiled-reduce-overhead"]] == ["ok"] * 3


@pytest.mark.parametrize("warmed,first_alone", [(False, True), (True, False)])
def test_a_job_whose_warm_up_ran_walks_its_first_invocation_with_the_others(tmp_path, monkeypatch, warmed,
                                                                              first_alone):
    """A compile entry without a warm-up compiles cold as its first invocation loads, so that invocation walks
    alone (first_alone); after its warm-up every invocation builds from the cache."""
    seen = {}

    class Conducted(Exception):
        pass

    def conduct(*args, **kwargs):
        seen.update(kwargs)
        raise Conducted
    monkeypatch.setattr(interleaved, "conduct", conduct)
    settings = _settings(implementations=("eager", "compiled"), compile_modes=("default",))
    inputs = SimpleNamespace(inputs=str(make_pool(tmp_path)), weights="unused")
    run = SimpleNamespace(device=devices.select({"device": "cpu"}))
    with pytest.raises(Conducted):
        interleaved.interleaved_rows(settings.jobs(), inputs, settings, Protocol(**PROTOCOL_DEFAULTS), CONFIG, 10, run,
                                     None, "fp32", tmp_path, warmed=warmed)
    assert seen["first_alone"] is first_alone
