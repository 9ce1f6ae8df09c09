"""The sweep's Python implementations on the CPU: faults injected through AC_FAULT (an oom or a crash never
stops the walk nor loses a measured cell), warm-up, cell budgets, host input, builds and their output checks."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import torch

from abstraction_cost.programs import native
from abstraction_cost.study_a import transfer
from abstraction_cost.study_a.sweep import cells as sweep_cells, python_model, python_walk
from abstraction_cost.study_a.sweep.cells import walk

from tests.fixtures.sweep_fakes import SKIPPED_B2, pool_dir, _run, TinyModel  # noqa: F401 (fixtures)


def test_python_sweep_survives_injected_oom_and_crash(pool_dir, monkeypatch):
    monkeypatch.setenv("AC_FAULT", "cell:oom@1,cell:crash@2")
    cells = walk([1, 2, 4], [8, 16], ["uint8-pinned"])
    rows = python_walk.python_cells(TinyModel(), cells, transfer.Pool(pool_dir), 1, 3, _run())
    assert [(r["cell"], r["status"]) for r in rows] == [(0, "ok"), (1, "oom"), (2, "oom"), (3, "ok"), (4, "ok"),
                                                        (5, "ok")]
    assert rows[1]["message"] == "injected out of memory (AC_FAULT)"
    assert rows[2]["message"] == SKIPPED_B2  # crash@2 is never reached: batch 4 is skipped after batch 2's oom
    ok = rows[5]
    assert ok["repeats"] == 3 and ok["time_ms_low"] <= ok["time_ms"] <= ok["time_ms_high"]
    assert ok["time_per_sample_ms"] == pytest.approx(ok["time_ms"] / 4)
    assert ok["h2d_bytes"] == 4 * 3 * 16 * 16 and 0 <= ok["h2d_ms"] <= ok["time_ms"]  # the copy is in the call
    assert ok["transfer"] == "uint8-pinned"


def test_python_warm_up_runs_on_a_shapes_first_mode_and_the_first_uint8_cell_only(pool_dir, monkeypatch):
    """A shape's later modes follow on its allocations without warm-up calls; the device's memory is returned
    between shapes and after a failed cell, whose next cell is cold again."""
    monkeypatch.setenv("AC_FAULT", "cell:crash@4")
    released, model = [], TinyModel()
    monkeypatch.setattr(python_walk, "_release", lambda device, collect: released.append(collect))
    calls = []
    forward = model.forward
    model.forward = lambda x: calls.append(tuple(x.shape)) or forward(x)
    cells = walk([1, 2], [8], list(sweep_cells.TRANSFERS))
    rows = python_walk.python_cells(model, cells, transfer.Pool(pool_dir), 2, 3, _run())
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "ok", "error", "ok"]
    assert [r.get("warmup_calls") for r in rows] == [2, 0, 2, 2, None, 2]
    assert released == [False, True, False]  # before batch 2, after the crash, at the end
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(calls) == sum(r["warmup_calls"] + r["repeats"] for r in ok)


def test_python_oom_after_a_compiled_build_keeps_the_builds_time(pool_dir):
    """A shape found out of memory after its compile: the build took its time, which the row keeps (the sweep's
    overhead counts it as a build)."""
    class OomAfterBuild(TinyModel):
        build_s = None

        def build(self, example):
            self.build_s = 12.5
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 32.00 GiB")
    rows = python_walk.python_cells(OomAfterBuild(), walk([1], [8], ["float32-pageable"]), transfer.Pool(pool_dir),
                                    1, 2, _run())
    assert rows[0]["status"] == "oom" and rows[0]["build_s"] == 12.5


def test_python_crash_is_an_error_row_and_the_walk_goes_on(pool_dir, monkeypatch):
    monkeypatch.setenv("AC_FAULT", "cell:crash@0")
    rows = python_walk.python_cells(TinyModel(), walk([1, 2], [8], ["float32-pageable"]), transfer.Pool(pool_dir), 0, 2,
                                    _run())
    assert [r["status"] for r in rows] == ["error", "ok"]
    assert "InjectedCrash" in rows[0]["message"]


class OomFromBatch4(TinyModel):
    """Runs out of memory at batch 4 and above, as a real model does on a GPU too small for the shape."""

    def __init__(self):
        super().__init__()
        conv = self.forward
        self.forward = lambda x: conv(x) if x.shape[0] < 4 else self._oom()

    @staticmethod
    def _oom():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 TiB")


class SlowModel(TinyModel):
    """Each call takes 5 ms or more, as a large cell's call takes seconds on a GPU."""

    def __init__(self):
        super().__init__()
        conv = self.forward
        self.forward = lambda x: (time.sleep(0.005), conv(x))[1]


@pytest.mark.parametrize("budget_s,repeats", [(None, 6), (0.001, 3), (10.0, 6)])
def test_python_cell_budget_ends_a_cells_timed_calls(pool_dir, budget_s, repeats):
    """study_a.sweep.cell_budget_s: no more calls once they took the budget, but never fewer than three (where the
    budget ends a cell after that is sweep_cells.more_repeats' test)."""
    rows = python_walk.python_cells(SlowModel(), walk([1], [8], ["float32-pageable"]), transfer.Pool(pool_dir), 1, 6,
                                    _run(), budget_s=budget_s)
    assert rows[0]["status"] == "ok" and rows[0]["repeats"] == repeats


def test_python_host_input_is_made_while_the_warm_up_runs(pool_dir, monkeypatch):
    """The warm-up calls are queued on the device, the host batch is made, and only then does the process wait
    for the device: the host's work on a large batch overlaps the device's, not adds to the job's time."""
    events = []
    load = transfer.CellInput.load
    monkeypatch.setattr(transfer.CellInput, "load", lambda self, pool: (events.append("load"), load(self, pool)))
    monkeypatch.setattr(python_walk, "synchronize", lambda device: events.append("sync"))
    model = TinyModel()
    conv = model.forward
    model.forward = lambda x: (events.append("forward"), conv(x))[1]
    python_walk.python_cells(model, walk([1], [8], ["float32-pageable"]), transfer.Pool(pool_dir), 2, 1, _run())
    assert events[:events.index("load") + 2] == ["sync", "forward", "forward", "load", "sync"]


def test_python_oom_shape_fails_in_its_warm_up_before_its_host_input_is_made(pool_dir, monkeypatch):
    """Warm-up calls run on the zeroed device buffer, so a shape out of memory costs no host batch (a 6 GB
    normalised, pinned copy at batch 512, 1024 px); each transfer mode tries it and skips its own larger
    batches."""
    loaded = []
    load = transfer.CellInput.load
    monkeypatch.setattr(transfer.CellInput, "load", lambda self, pool: (loaded.append(self.batch), load(self, pool)))
    cells = walk([2, 4, 8], [8], ["float32-pageable", "uint8-pinned"])
    rows = python_walk.python_cells(OomFromBatch4(), cells, transfer.Pool(pool_dir), 1, 2, _run())
    assert [(r["batch_size"], r["transfer"], r["status"]) for r in rows] == [
        (2, "float32-pageable", "ok"), (2, "uint8-pinned", "ok"), (4, "float32-pageable", "oom"),
        (4, "uint8-pinned", "oom"), (8, "float32-pageable", "oom"), (8, "uint8-pinned", "oom")]
    assert rows[2]["message"] == "CUDA out of memory. Tried to allocate 1 TiB"
    assert rows[5]["message"] == "skipped: batch 4 already out of memory at this resolution"
    assert loaded == [2, 2]  # only the shapes that fitted made their host batch


class ScriptedOomFromBatch4(TinyModel):
    """Runs out of memory from batch 4 on as a TorchScript module does: a RuntimeError of the interpreter with
    torch's message inside; only the allocator's oom count (python_walk.oom_count) says what it was."""

    def __init__(self):
        super().__init__()
        conv = self.forward
        self.forward = lambda x: conv(x) if x.shape[0] < 4 else self._fail()

    @staticmethod
    def _fail():
        ScriptedOomFromBatch4.ooms += 1
        raise RuntimeError("The following operation failed in the TorchScript interpreter.\nTraceback of "
                           "TorchScript (most recent call last):\n  File \"code/resnet.py\", line 28\n"
                           "RuntimeError: CUDA out of memory. Tried to allocate 32.00 GiB.")


@pytest.mark.parametrize("counted", [True, False])
def test_an_oom_inside_torchscript_is_an_oom_cell_where_the_allocator_counted_it(pool_dir, monkeypatch, counted):
    ScriptedOomFromBatch4.ooms = 0
    monkeypatch.setattr(python_walk, "oom_count", lambda device: ScriptedOomFromBatch4.ooms if counted else 0)
    rows = python_walk.python_cells(ScriptedOomFromBatch4(), walk([2, 4, 8], [8], ["float32-pageable"]),
                                    transfer.Pool(pool_dir), 1, 2, _run())
    if counted:
        assert [r["status"] for r in rows] == ["ok", "oom", "oom"]
        assert rows[1]["message"] == "CUDA out of memory. Tried to allocate 32.00 GiB." and rows[2]["message"] == \
            "skipped: batch 4 already out of memory at this resolution"
    else:  # any other error of the interpreter stays an error, and batch 8 is tried
        assert [r["status"] for r in rows] == ["ok", "error", "error"]
        assert rows[1]["message"] == "RuntimeError: The following operation failed in the TorchScript interpreter."


def test_a_program_killed_by_an_uncaught_exception_is_named_by_its_what_line():
    tail = ["terminate called after throwing an instance of 'c10::AcceleratorError'",
            "  what():  CUDA error: an illegal memory access was encountered",
            "frame #0: c10::Error::Error(...) + 0x9d", "frame #1: <unknown function> + 0x81474"]
    result = native.Result(command=["/x/ac_libtorch"], returncode=-6, records=[], stderr_tail=tail)
    assert result.failure() == ("error", "ac_libtorch was killed by SIGABRT: what():  CUDA error: an illegal "
                                         "memory access was encountered")
    result = native.Result(command=["/x/ac_libtorch"], returncode=-11, records=[], stderr_tail=["a", "b"])
    assert result.failure() == ("error", "ac_libtorch was killed by SIGSEGV: a | b")


def test_compiled_build_is_made_once_per_shape_for_all_its_transfer_modes(pool_dir, tmp_path, monkeypatch):
    """compiled-<mode> compiles afresh per batch × resolution; the shape's other transfer modes run that build
    (the same graph: every mode hands the model a float32 batch of that shape), so build_s is on its first row."""
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    compiles = []
    monkeypatch.setattr(torch, "compile", lambda module, **kw: compiles.append(kw) or module)
    model = python_model.PythonModel("compiled-default", SimpleNamespace(weights=str(weights)), 3, 10,
                                     torch.device("cpu"))
    rows = python_walk.python_cells(model, walk([1, 2], [8], ["float32-pageable", "uint8-pinned"]),
                                    transfer.Pool(pool_dir), 0, 1, _run())
    assert compiles == [{"mode": "default", "dynamic": False}] * 2
    assert [r["build_s"] is not None for r in rows] == [True, False, True, False]
    assert [r["status"] for r in rows] == ["ok"] * 4


def test_dynamic_compile_is_one_build_for_the_job_each_shape_first_call_timed_and_checked(pool_dir, tmp_path,
                                                                                        monkeypatch):
    """compile_shapes: dynamic compiles once with dynamic shapes; every new shape's first call (the compile, a
    recompile or one run) is still timed apart as build_s and its output checked against eager's."""
    from abstraction_cost.measure import output_check
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    compiles, checked = [], []
    monkeypatch.setattr(torch, "compile", lambda module, **kw: compiles.append(kw) or module)

    def reference(module, args, *rest):
        checked.append(tuple(args[0].shape))
        return output_check.reference(module, args, *rest)
    monkeypatch.setattr(python_model, "reference", reference)
    model = python_model.PythonModel("compiled-default", SimpleNamespace(weights=str(weights)), 3, 10,
                                     torch.device("cpu"), compile_shapes="dynamic")
    rows = python_walk.python_cells(model, walk([1, 2], [8, 16], ["float32-pageable", "uint8-pinned"]),
                                    transfer.Pool(pool_dir), 0, 1, _run())
    assert compiles == [{"mode": "default", "dynamic": True}]
    assert [r["build_s"] is not None for r in rows] == [True, False] * 4
    assert checked == [(1, 3, 8, 8), (2, 3, 8, 8), (1, 3, 16, 16), (2, 3, 16, 16)]
    assert [r["status"] for r in rows] == ["ok"] * 8
    assert sweep_cells.build_kind("compiled-default", "dynamic") == "dynamic"


def test_dynamic_compile_traces_once_and_does_not_recompile_where_a_feature_map_grows_past_1x1(pool_dir, tmp_path,
                                                                                              monkeypatch):
    """At 8 px ResNet-50's feature maps from layer2 on are 1 × 1; dynamo would specialise that size and compile the
    network again at 16 px. The dynamic build reasons size-obliviously, so the job's first shape is its only
    compile (through aot_eager: dynamo's guards without Inductor's minutes on the CPU). And it traces once: with
    batch norm's eps and momentum symbolic, AOTAutograd would fail on them after a whole trace and dynamo would
    trace the network again (two AOTAutograd traces for one graph)."""
    from torch._dynamo.utils import counters
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda module, mode, dynamic: compile_(module, backend="aot_eager",
                                                                                 dynamic=dynamic))
    torch._dynamo.reset()
    counters.clear()
    model = python_model.PythonModel("compiled-default", SimpleNamespace(weights=str(weights)), 3, 10,
                                     torch.device("cpu"), compile_shapes="dynamic")
    rows = python_walk.python_cells(model, walk([1, 2], [8, 16], ["float32-pageable"]), transfer.Pool(pool_dir), 0, 1,
                                    _run())
    assert [r["status"] for r in rows] == ["ok"] * 4, [r.get("message") for r in rows]
    assert counters["stats"]["unique_graphs"] == 1
    assert counters["aot_autograd"]["total"] == 1
    torch._dynamo.reset()


def test_a_shape_whose_eager_reference_is_out_of_memory_is_oom_before_its_build(pool_dir, tmp_path, monkeypatch):
    """Eager's logits for the output check come before a new shape's build: a shape eager cannot hold is an oom
    cell at once, not after minutes of compiling, and its later modes are skipped by the oom rule."""
    from abstraction_cost.measure import output_check
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    built = []
    monkeypatch.setattr(torch, "compile", lambda module, **kw: module)

    def reference(module, args, *rest):
        if args[0].shape[0] == 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return output_check.reference(module, args, *rest)
    monkeypatch.setattr(python_model, "reference", reference)
    model = python_model.PythonModel("compiled-default", SimpleNamespace(weights=str(weights)), 3, 10,
                                     torch.device("cpu"))
    build = model.build
    monkeypatch.setattr(model, "build", lambda example: built.append(tuple(example.shape)) or build(example))
    rows = python_walk.python_cells(model, walk([1, 2], [8], ["float32-pageable", "uint8-pinned"]),
                                    transfer.Pool(pool_dir), 0, 1, _run())
    assert [r["status"] for r in rows] == ["ok", "ok", "oom", "oom"]
    assert built == [(1, 3, 8, 8), (1, 3, 8, 8)]  # batch 2 never built
    assert rows[2]["message"] == ("eager's forward for the output check, before the build: CUDA out of memory. "
                                  "Tried to allocate 8.00 GiB")
    assert rows[2].get("build_s") is None and rows[3]["message"].startswith("skipped:")


def test_a_compiled_build_that_computes_something_else_is_wrong_output_untimed(pool_dir, tmp_path, monkeypatch):
    """Correct before fast: a build whose logits differ from eager's on the cell's input is never timed."""
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    monkeypatch.setattr(torch, "compile", lambda module, **kw: lambda x: module(x) + 1.0)
    model = python_model.PythonModel("compiled-default", SimpleNamespace(weights=str(weights)), 3, 10,
                                     torch.device("cpu"))
    rows = python_walk.python_cells(model, walk([1, 2], [8], ["float32-pageable", "uint8-pinned"]),
                                    transfer.Pool(pool_dir), 0, 2, _run())
    assert [r["status"] for r in rows] == ["wrong_output"] * 4
    assert rows[2]["message"].startswith("compiled-default at input (2, 3, 8, 8): output differs from eager's")
    assert all(r.get("time_ms") is None for r in rows)
