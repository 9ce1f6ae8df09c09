"""Study A's inference sweep on the CPU: walk order, the oom-skip rule, config checks, and faults injected through
AC_SWEEP_FAULT in Python and in C++ (a framework-free fake backend of native/common/sweep.h, and ac_libtorch
sweep): an oom or a crash never stops the sweep nor loses a measured cell, and a crashed program restarts from
the next cell."""
from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from abstraction_cost.measure.nvml import NvmlSampler
from abstraction_cost.measure.run import Run
from abstraction_cost.study_a import native, transfer
from abstraction_cost.study_a.sweep import serial as sweep, cells as sweep_cells
from abstraction_cost.study_a.sweep.cells import Cell, OomTracker, SweepConfigError, walk
from tests.fixtures.sweep_jobs import make_pool, sweep_job
from tests.fixtures.repository import REPO

SKIPPED_B2 = "skipped: batch 2 already out of memory at this resolution"


def _run() -> Run:
    return Run(run_id=uuid.uuid4().hex[:16], device=torch.device("cpu"), sampler=NvmlSampler(None, 50, "no GPU"))


def _sweep_config(**overrides) -> dict:
    s = {"batches": [1, 2], "resolutions": [8, 16], "warmup": 0, "repeats": 2,
         "transfers": list(sweep_cells.TRANSFERS), "implementations": ["eager", "libtorch"], "numerics": ["fp32"],
         "compile_modes": [],
         "pool": 2, "require_gpu": False, "kernels": {"batch_size": 2, "resolution": 16, "top": 5}}
    s.update(overrides)
    return s


# ------------------------------------------------------------------------------------------- settings
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
    assert sweep_cells.faults({"AC_SWEEP_FAULT": "oom@1,crash@3"}) == {1: "oom", 3: "crash"}
    assert sweep_cells.faults({}) == {}
    with pytest.raises(ValueError, match="AC_SWEEP_FAULT"):
        sweep_cells.faults({"AC_SWEEP_FAULT": "boom@1"})


def test_jobs_expand_compiled_per_mode():
    config = {"study_a": {"sweep": _sweep_config(implementations=["eager", "compiled"],
                                                 compile_modes=["default", "max-autotune"])}}
    assert sweep_cells.SweepSettings.from_config(config).jobs() == ["eager", "compiled-default",
                                                                    "compiled-max-autotune"]


# -------------------------------------------------------------------------------------------- inputs
@pytest.fixture
def pool_dir(tmp_path) -> Path:
    """A sweep input directory as rule sweep_inputs writes it: 2 images of 3×20×20 resized to 8 and 16."""
    return make_pool(tmp_path)


@pytest.mark.parametrize("mode,dtype,nbytes", [("float32-pageable", torch.float32, 3 * 3 * 8 * 8 * 4),
                                               ("uint8-pinned", torch.uint8, 3 * 3 * 8 * 8)])
def test_cell_input_has_the_cells_exact_shape_and_same_values(pool_dir, mode, dtype, nbytes):
    pool = transfer.Pool(pool_dir)
    data = transfer.cell_input(pool, 3, 8, mode, torch.device("cpu"))
    assert data.host is None and data.device_buffer.dtype == dtype and not data.device_buffer.any()
    data.load(pool)
    assert data.host.dtype == dtype and data.nbytes == nbytes
    images = torch.from_numpy(pool.images(8))[[0, 1, 0]]  # batch 3 from a pool of 2: the pool repeated in order
    expected = images if dtype == torch.uint8 else (images.float() / 255.0 - 0.5) / 0.25  # the manifest's mean, std
    assert torch.equal(data.host, expected)
    x = data.to_device()
    assert x.shape == (3, 3, 8, 8) and x.dtype == torch.float32
    other = transfer.cell_input(pool, 3, 8, "float32-pinned", torch.device("cpu"))
    other.load(pool)
    torch.testing.assert_close(x, other.to_device())  # uint8 normalised on the device = float32 on the host
    torch.testing.assert_close(x[2], x[0])  # batch 3 from a pool of 2 repeats the pool in order


# ----------------------------------------------------------------------------------- Python processes
class TinyModel:
    """A stand-in for PythonModel: a real forward on the CPU, no per-shape build."""

    def __init__(self):
        self.forward = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1),
                                           torch.nn.Flatten()).eval()

    def needs_reference(self, shape):
        return False

    def build(self, example):
        return None

    def check(self, example):
        pass


def test_python_sweep_survives_injected_oom_and_crash(pool_dir, monkeypatch):
    monkeypatch.setenv("AC_SWEEP_FAULT", "oom@1,crash@2")
    cells = walk([1, 2, 4], [8, 16], ["uint8-pinned"])
    rows = sweep.python_cells(TinyModel(), cells, transfer.Pool(pool_dir), 1, 3, _run())
    assert [(r["cell"], r["status"]) for r in rows] == [(0, "ok"), (1, "oom"), (2, "oom"), (3, "ok"), (4, "ok"),
                                                        (5, "ok")]
    assert rows[1]["message"] == "injected out of memory (AC_SWEEP_FAULT)"
    assert rows[2]["message"] == SKIPPED_B2  # crash@2 is never reached: batch 4 is skipped after batch 2's oom
    ok = rows[5]
    assert ok["repeats"] == 3 and ok["time_ms_low"] <= ok["time_ms"] <= ok["time_ms_high"]
    assert ok["time_per_sample_ms"] == pytest.approx(ok["time_ms"] / 4)
    assert ok["h2d_bytes"] == 4 * 3 * 16 * 16 and 0 <= ok["h2d_ms"] <= ok["time_ms"]  # the copy is in the call
    assert ok["transfer"] == "uint8-pinned"


def test_python_warm_up_runs_on_a_shapes_first_mode_and_the_first_uint8_cell_only(pool_dir, monkeypatch):
    """A shape's later modes follow on its allocations without warm-up calls; the device's memory is returned
    between shapes and after a failed cell, whose next cell is cold again."""
    monkeypatch.setenv("AC_SWEEP_FAULT", "crash@4")
    released, model = [], TinyModel()
    monkeypatch.setattr(sweep, "_release", lambda device, collect: released.append(collect))
    calls = []
    forward = model.forward
    model.forward = lambda x: calls.append(tuple(x.shape)) or forward(x)
    cells = walk([1, 2], [8], list(sweep_cells.TRANSFERS))
    rows = sweep.python_cells(model, cells, transfer.Pool(pool_dir), 2, 3, _run())
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
    rows = sweep.python_cells(OomAfterBuild(), walk([1], [8], ["float32-pageable"]), transfer.Pool(pool_dir), 1, 2,
                              _run())
    assert rows[0]["status"] == "oom" and rows[0]["build_s"] == 12.5


def test_python_crash_is_an_error_row_and_the_walk_goes_on(pool_dir, monkeypatch):
    monkeypatch.setenv("AC_SWEEP_FAULT", "crash@0")
    rows = sweep.python_cells(TinyModel(), walk([1, 2], [8], ["float32-pageable"]), transfer.Pool(pool_dir), 0, 2,
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
    rows = sweep.python_cells(SlowModel(), walk([1], [8], ["float32-pageable"]), transfer.Pool(pool_dir), 1, 6,
                              _run(), budget_s=budget_s)
    assert rows[0]["status"] == "ok" and rows[0]["repeats"] == repeats


def test_python_host_input_is_made_while_the_warm_up_runs(pool_dir, monkeypatch):
    """The warm-up calls are queued on the device, the host batch is made, and only then does the process wait
    for the device: the host's work on a large batch overlaps the device's, not adds to the job's time."""
    events = []
    load = transfer.CellInput.load
    monkeypatch.setattr(transfer.CellInput, "load", lambda self, pool: (events.append("load"), load(self, pool)))
    monkeypatch.setattr(sweep, "synchronize", lambda device: events.append("sync"))
    model = TinyModel()
    conv = model.forward
    model.forward = lambda x: (events.append("forward"), conv(x))[1]
    sweep.python_cells(model, walk([1], [8], ["float32-pageable"]), transfer.Pool(pool_dir), 2, 1, _run())
    assert events[:events.index("load") + 2] == ["sync", "forward", "forward", "load", "sync"]


def test_python_oom_shape_fails_in_its_warm_up_before_its_host_input_is_made(pool_dir, monkeypatch):
    """Warm-up calls run on the zeroed device buffer, so a shape out of memory costs no host batch (a 6 GB
    normalised, pinned copy at batch 512, 1024 px); each transfer mode tries it and skips its own larger
    batches."""
    loaded = []
    load = transfer.CellInput.load
    monkeypatch.setattr(transfer.CellInput, "load", lambda self, pool: (loaded.append(self.batch), load(self, pool)))
    cells = walk([2, 4, 8], [8], ["float32-pageable", "uint8-pinned"])
    rows = sweep.python_cells(OomFromBatch4(), cells, transfer.Pool(pool_dir), 1, 2, _run())
    assert [(r["batch_size"], r["transfer"], r["status"]) for r in rows] == [
        (2, "float32-pageable", "ok"), (2, "uint8-pinned", "ok"), (4, "float32-pageable", "oom"),
        (4, "uint8-pinned", "oom"), (8, "float32-pageable", "oom"), (8, "uint8-pinned", "oom")]
    assert rows[2]["message"] == "CUDA out of memory. Tried to allocate 1 TiB"
    assert rows[5]["message"] == "skipped: batch 4 already out of memory at this resolution"
    assert loaded == [2, 2]  # only the shapes that fitted made their host batch


class ScriptedOomFromBatch4(TinyModel):
    """Runs out of memory from batch 4 on as a TorchScript module does: a RuntimeError of the interpreter with
    torch's message inside; only the allocator's oom count (sweep.oom_count) says what it was."""

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
    monkeypatch.setattr(sweep, "oom_count", lambda device: ScriptedOomFromBatch4.ooms if counted else 0)
    rows = sweep.python_cells(ScriptedOomFromBatch4(), walk([2, 4, 8], [8], ["float32-pageable"]),
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
    model = sweep.PythonModel("compiled-default", SimpleNamespace(weights=str(weights)), 3, 10, torch.device("cpu"))
    rows = sweep.python_cells(model, walk([1, 2], [8], ["float32-pageable", "uint8-pinned"]),
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
    monkeypatch.setattr(sweep, "reference", reference)
    model = sweep.PythonModel("compiled-default", SimpleNamespace(weights=str(weights)), 3, 10, torch.device("cpu"),
                              compile_shapes="dynamic")
    rows = sweep.python_cells(model, walk([1, 2], [8, 16], ["float32-pageable", "uint8-pinned"]),
                              transfer.Pool(pool_dir), 0, 1, _run())
    assert compiles == [{"mode": "default", "dynamic": True}]
    assert [r["build_s"] is not None for r in rows] == [True, False] * 4
    assert checked == [(1, 3, 8, 8), (2, 3, 8, 8), (1, 3, 16, 16), (2, 3, 16, 16)]
    assert [r["status"] for r in rows] == ["ok"] * 8
    assert sweep.build_kind("compiled-default", "dynamic") == "dynamic"


def test_dynamic_compile_does_not_recompile_where_a_feature_map_grows_past_1x1(pool_dir, tmp_path, monkeypatch):
    """At 8 px ResNet-50's feature maps from layer2 on are 1 × 1; dynamo would specialise that size and compile the
    network again at 16 px. The dynamic build reasons size-obliviously, so the job's first shape is its only
    compile (through aot_eager: dynamo's guards without Inductor's minutes on the CPU)."""
    from torch._dynamo.utils import counters
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda module, mode, dynamic: compile_(module, backend="aot_eager",
                                                                                 dynamic=dynamic))
    torch._dynamo.reset()
    counters.clear()
    model = sweep.PythonModel("compiled-default", SimpleNamespace(weights=str(weights)), 3, 10, torch.device("cpu"),
                              compile_shapes="dynamic")
    rows = sweep.python_cells(model, walk([1, 2], [8, 16], ["float32-pageable"]), transfer.Pool(pool_dir), 0, 1,
                              _run())
    assert [r["status"] for r in rows] == ["ok"] * 4, [r.get("message") for r in rows]
    assert counters["stats"]["unique_graphs"] == 1
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
    monkeypatch.setattr(sweep, "reference", reference)
    model = sweep.PythonModel("compiled-default", SimpleNamespace(weights=str(weights)), 3, 10, torch.device("cpu"))
    build = model.build
    monkeypatch.setattr(model, "build", lambda example: built.append(tuple(example.shape)) or build(example))
    rows = sweep.python_cells(model, walk([1, 2], [8], ["float32-pageable", "uint8-pinned"]),
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
    model = sweep.PythonModel("compiled-default", SimpleNamespace(weights=str(weights)), 3, 10, torch.device("cpu"))
    rows = sweep.python_cells(model, walk([1, 2], [8], ["float32-pageable", "uint8-pinned"]),
                              transfer.Pool(pool_dir), 0, 2, _run())
    assert [r["status"] for r in rows] == ["wrong_output"] * 4
    assert rows[2]["message"].startswith("compiled-default at input (2, 3, 8, 8): output differs from eager's")
    assert all(r.get("time_ms") is None for r in rows)


# -------------------------------------------------------------------------------------- C++ programs
@pytest.fixture(scope="module")
def fake_program(tmp_path_factory) -> Path:
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    exe = tmp_path_factory.mktemp("fake") / "sweep_fake"
    subprocess.run([compiler, "-std=c++20", "-O1", "-Wall", "-Wextra", "-Werror", "-I", str(REPO / "native/common"),
                    str(REPO / "native/common/examples/sweep_fake.cpp"), "-o", str(exe)], check=True)
    return exe


def _fake_command(exe, cells, oom_above=10**9):
    batches = sorted({c.batch for c in cells})
    resolutions = sorted({c.resolution for c in cells})
    transfers = list(dict.fromkeys(c.transfer for c in cells))

    def command_for(start, oom_at):
        command = [str(exe), "--batches", ",".join(map(str, batches)),
                   "--resolutions", ",".join(map(str, resolutions)), "--warmup", "1", "--repeats", "3",
                   "--transfers", ",".join(transfers), "--start-cell", str(start), "--oom-above", str(oom_above)]
        return command + (["--oom-at", oom_at] if oom_at else [])
    return command_for


def test_cpp_crash_loses_no_cell_and_restarts_from_the_next(fake_program, monkeypatch):
    monkeypatch.setenv("AC_SWEEP_FAULT", "crash@1,crash@4")
    cells = walk([1, 2, 4], [8, 16], ["float32-pinned"])
    rows = sweep.native_cells(cells, _fake_command(fake_program, cells), _run(), "fake")
    assert [(r["cell"], r["status"], r["attempt"]) for r in rows] == [
        (0, "ok", 0), (1, "error", 0), (2, "ok", 1), (3, "ok", 1), (4, "error", 1), (5, "ok", 2)]
    assert rows[1]["exit_status"] == -11 and "SIGSEGV" in rows[1]["message"]
    assert rows[5]["h2d_bytes"] == 4 * 3 * 16 * 16 * 4 and rows[5]["repeats"] == 3


def test_cpp_oom_skips_larger_batches_even_across_a_restart(fake_program, monkeypatch):
    # batch 2 at 16 px is oom (2·16² > 300); the crash in cell 4 restarts the program, which must still skip 4
    monkeypatch.setenv("AC_SWEEP_FAULT", "crash@4")
    cells = walk([1, 2, 4, 8], [8, 16], ["float32-pinned"])
    rows = sweep.native_cells(cells, _fake_command(fake_program, cells, oom_above=300), _run(), "fake")
    by_cell = {r["cell"]: (r["status"], r["message"]) for r in rows}
    assert [by_cell[i][0] for i in range(4)] == ["ok", "ok", "ok", "oom"]  # 8·8² = 512 > 300
    assert by_cell[4][0] == "error" and by_cell[5] == ("oom", "fake: cannot allocate 1536 elements")
    assert by_cell[6] == ("oom", SKIPPED_B2) and by_cell[7] == ("oom", SKIPPED_B2)


def test_cpp_walks_every_transfer_mode_of_a_shape_in_one_process(fake_program, monkeypatch):
    """Both modes of each shape back to back; a crash in one mode's cell restarts the program, which still skips
    the larger batches of the mode that was oom (--oom-at R:B:T) and only those."""
    monkeypatch.setenv("AC_SWEEP_FAULT", "oom@2,crash@3")
    cells = walk([1, 2, 4], [8], ["uint8-pinned", "float32-pageable"])
    launches = []
    command_for = _fake_command(fake_program, cells)
    rows = sweep.native_cells(cells, lambda start, oom_at: launches.append(oom_at) or command_for(start, oom_at),
                              _run(), "fake")
    assert [(r["batch_size"], r["transfer"], r["status"]) for r in rows] == [
        (1, "uint8-pinned", "ok"), (1, "float32-pageable", "ok"), (2, "uint8-pinned", "oom"),
        (2, "float32-pageable", "error"), (4, "uint8-pinned", "oom"), (4, "float32-pageable", "ok")]
    assert launches == ["", "8:2:uint8-pinned"] and rows[4]["message"] == SKIPPED_B2
    assert rows[5]["h2d_bytes"] == 4 * 3 * 8 * 8 * 4 and rows[0]["h2d_bytes"] == 3 * 8 * 8
    assert all(r["h2d_ms"] <= r["time_ms"] for r in rows if r["status"] == "ok")


def test_cpp_warm_up_runs_on_a_shapes_first_mode_and_after_an_oom(fake_program):
    """native/common/sweep.h: a shape's later modes are warm (the fake backend is cold only after release()); an
    oom shape's later modes are skipped without being tried, and the next shape starts cold."""
    cells = walk([1, 2, 4], [8], list(sweep_cells.TRANSFERS))
    rows = sweep.native_cells(cells, _fake_command(fake_program, cells, oom_above=150), _run(), "fake")
    assert [(r["status"], r.get("warmup_calls")) for r in rows] == [
        ("ok", 1), ("ok", 0), ("ok", 0), ("ok", 1), ("ok", 0), ("ok", 0), ("oom", None), ("oom", None), ("oom", None)]
    assert rows[7]["message"] == rows[8]["message"] == (
        "skipped: batch 4 already out of memory at this resolution in float32-pageable")


@pytest.mark.parametrize("budget,repeats", [("0", 10), ("1e-9", 3), ("60", 10)])
def test_cpp_cell_budget_ends_a_cells_timed_calls(fake_program, budget, repeats):
    """--cell-budget-s (native/common/sweep.h): the same rule as the Python processes' (sweep_cells.more_repeats)."""
    records = []
    native.launch([str(fake_program), "--batches", "1", "--resolutions", "8", "--warmup", "0", "--repeats", "10",
                   "--transfers", "uint8-pinned", "--oom-above", "1000", "--cell-budget-s", budget],
                  on_record=records.append)
    cells = [r for r in records if r["kind"] == "cell"]
    assert len(cells) == 1 and len(cells[0]["times_ms"]) == repeats


def test_cpp_program_that_never_starts_fails_every_cell_once(tmp_path):
    cells = walk([1, 2], [8], ["float32-pageable"])
    rows = sweep.native_cells(cells, lambda start, oom_at: [str(tmp_path / "missing")], _run(), "missing")
    assert [(r["status"], r["exit_status"]) for r in rows] == [("error", 127), ("error", 127)]
    assert "cannot start" in rows[0]["message"]


def test_fake_program_refuses_bad_flags(fake_program):
    def refused(*flags):
        out = subprocess.run([str(fake_program), "--warmup", "0", "--repeats", "1", "--oom-above", "1", *flags],
                             capture_output=True, text=True)
        assert out.returncode == 2
        return out.stdout
    assert "--batches: '0' is not a positive integer" in refused("--batches", "8,0", "--resolutions", "8",
                                                                 "--transfers", "uint8-pinned")
    assert "--transfers: 'float16'" in refused("--batches", "8", "--resolutions", "8",
                                               "--transfers", "uint8-pinned,float16")
    assert "--transfers: 'uint8-pinned' is given twice" in refused("--batches", "8", "--resolutions", "8",
                                                                   "--transfers", "uint8-pinned,uint8-pinned")
    assert "--oom-at: '8:2' is not RESOLUTION:BATCH:TRANSFER" in refused(
        "--batches", "8", "--resolutions", "8", "--transfers", "uint8-pinned", "--oom-at", "8:2")
    assert "--cell-budget-s must be >= 0 seconds" in refused(
        "--batches", "8", "--resolutions", "8", "--transfers", "uint8-pinned", "--cell-budget-s", "-1")


def test_libtorch_sweep_on_the_cpu_with_a_crash(pool_dir, tmp_path, monkeypatch):
    """ac_libtorch sweep (torch::nn ResNet-50) on the CPU: a crash in cell 1, restart, every cell has its row."""
    from abstraction_cost.models import resnet, weights_file
    program = native.ensure_built("libtorch")
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 5).state_dict(), weights)
    settings = SimpleNamespace(batches=(1, 2), resolutions=(8, 16), transfers=("uint8-pinned",), warmup=0, repeats=2,
                               cell_budget_s=None)
    inputs = SimpleNamespace(inputs=str(pool_dir), weights=str(weights), program=str(program))
    manifest = transfer.read_manifest(pool_dir)
    config = {"backend_flags": {"tf32": False, "cudnn_benchmark": False}}
    cells = walk(settings.batches, settings.resolutions, settings.transfers)

    def command_for(start, oom_at):
        return sweep.sweep_command(program, "libtorch", inputs, manifest, settings, config, torch.device("cpu"), 5,
                                   start, oom_at)
    monkeypatch.setenv("AC_SWEEP_FAULT", "crash@1")
    rows = sweep.native_cells(cells, command_for, _run(), "libtorch")
    assert [(r["cell"], r["status"], r["attempt"]) for r in rows] == [(0, "ok", 0), (1, "error", 0),
                                                                      (2, "ok", 1), (3, "ok", 1)]
    assert rows[3]["h2d_bytes"] == 2 * 3 * 16 * 16 and rows[3]["time_ms"] > 0


@pytest.mark.parametrize("implementation", ["eager", "libtorch"])
def test_sweep_job_writes_every_cell_under_injected_faults(pool_dir, tmp_path, monkeypatch, implementation):
    """Rule sweep's job (measured run, table) on the smoke config (its two transfer modes), an oom at cell 1
    (batch 1, 8 px, uint8-pinned: batch 2 there is skipped, its float32 cell is not), a crash at cell 2 (batch 2,
    8 px, float32-pageable) and a wrong output at cell 5 (batch 1, 16 px, uint8-pinned: ac_libtorch's saved logits
    perturbed, which the job's check against eager's logits catches; every other cell's logits pass it)."""
    from abstraction_cost import config as config_module, tables
    from abstraction_cost.models import resnet, weights_file
    config = config_module.load(REPO / "config/smoke.yaml")
    config["study_a"]["sweep"].update(batches=[1, 2], resolutions=[8, 16], repeats=2, warmup=0)
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    inputs = SimpleNamespace(inputs=str(pool_dir), weights=str(weights))
    if implementation == "libtorch":
        inputs.program = str(native.ensure_built("libtorch"))
    job = sweep_job(config, inputs, implementation, tmp_path)
    monkeypatch.setenv("AC_SWEEP_FAULT", "oom@1,crash@2,wrong@5")
    sweep.run(job)
    df = tables.read("sweep", job.output.tables[0])
    assert df["cell"].to_list() == list(range(8))
    assert df["transfer"].to_list() == ["float32-pageable", "uint8-pinned"] * 4
    assert df["status"].to_list() == ["ok", "oom", "error", "oom", "ok", "wrong_output", "ok", "ok"]
    assert df["time_ms"][5] is None and df["time_per_sample_ms"][5] is None
    expected = {"libtorch": "libtorch at input (1, 3, 16, 16): logits differ from eager's: max |Δ|",
                "eager": "injected wrong output (AC_SWEEP_FAULT)"}[implementation]
    assert df["message"][5].startswith(expected)
    assert df["message"][3] == "skipped: batch 1 already out of memory at this resolution"
    assert df["run_id"].n_unique() == 1 and tables.read("environment", job.output.envs[0]).height == 1
    assert df["time_per_sample_ms"][7] > 0 and df["implementation"].unique().to_list() == [implementation]
    assert df["numerics"].unique().to_list() == ["fp32"]


# ------------------------------------------------------------------------------------------- numerics
@pytest.fixture
def process_numerics():
    """A job sets TF32 flags for its whole process; in this test process they are restored after the test."""
    from abstraction_cost.measure import numerics as nx
    with nx.applied("fp32"):
        yield


def _numerics_job(pool_dir, tmp_path, implementation, *numerics):
    """Rule sweep's job over `numerics` on the smoke config (2 cells each), its inputs made here."""
    from abstraction_cost import config as config_module
    from abstraction_cost.models import resnet, weights_file
    config = config_module.load(REPO / "config/smoke.yaml")
    config["study_a"]["sweep"].update(batches=[1, 2], resolutions=[8], transfers=["float32-pageable"], repeats=2,
                                      warmup=0, numerics=list(numerics))
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    inputs = SimpleNamespace(inputs=str(pool_dir), weights=str(weights))
    if sweep.kind(implementation)[1] == "cpp":
        inputs.program = str(native.ensure_built("libtorch"))
    return sweep_job(config, inputs, implementation, tmp_path, numerics)


@pytest.mark.parametrize("numerics,tf32", [("tf32", True), ("fp32", False)])
def test_sweep_job_sets_its_numerics_in_the_process_before_the_model(pool_dir, tmp_path, monkeypatch, numerics,
                                                                     tf32, process_numerics):
    """The job's TF32 flags are its numerics' (whatever the top-level numerics.tf32 says), set before the model
    is built and recorded in its environment row; every row is labelled."""
    from abstraction_cost import tables
    seen = {}
    built = sweep.PythonModel.__init__

    def spy(self, *args, **kwargs):
        seen.update(cudnn=torch.backends.cudnn.allow_tf32, matmul=torch.backends.cuda.matmul.allow_tf32)
        built(self, *args, **kwargs)
    monkeypatch.setattr(sweep.PythonModel, "__init__", spy)
    job = _numerics_job(pool_dir, tmp_path, "eager", numerics)
    job.config["backend_flags"]["tf32"] = not tf32  # the top-level setting must not leak into the job
    sweep.run(job)
    df, env = tables.read("sweep", job.output.tables[0]), tables.read("environment", job.output.envs[0])
    assert df["status"].to_list() == ["ok", "ok"] and df["numerics"].to_list() == [numerics] * 2
    assert seen == {"cudnn": tf32, "matmul": tf32}
    assert env["tf32_cudnn"].to_list() == [tf32] and env["tf32_matmul"].to_list() == [tf32]
    assert f"numerics={numerics}" in env["job"][0]


def test_one_sweep_job_measures_each_numerics_in_turn_in_one_process(pool_dir, tmp_path, monkeypatch,
                                                                     process_numerics):
    """One job per implementation: each numerics gets its own model built under its own flags, its own table and
    environment row (own run_id); the kept cells are cleared only after the last numerics is written."""
    from abstraction_cost import tables
    from abstraction_cost.study_a.sweep.store import cells_dir
    seen = []
    built = sweep.PythonModel.__init__

    def spy(self, *args, **kwargs):
        seen.append((torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32))
        built(self, *args, **kwargs)
    monkeypatch.setattr(sweep.PythonModel, "__init__", spy)
    job = _numerics_job(pool_dir, tmp_path, "eager", "fp32", "tf32")
    cleared = []
    monkeypatch.setattr(sweep.CellStore, "clear", lambda self: cleared.append(self.directory))
    sweep.run(job)
    assert seen == [(False, False), (True, True)]
    rows = [tables.read("sweep", t) for t in job.output.tables]
    envs = [tables.read("environment", e) for e in job.output.envs]
    assert [r["numerics"].unique().to_list() for r in rows] == [["fp32"], ["tf32"]]
    assert all(r["status"].to_list() == ["ok", "ok"] for r in rows)
    assert [e["tf32_cudnn"].to_list() for e in envs] == [[False], [True]]
    assert rows[0]["run_id"][0] != rows[1]["run_id"][0]
    assert cleared == [cells_dir(t) for t in job.output.tables]


def test_sweep_job_refuses_an_unknown_numerics_naming_the_key(pool_dir, tmp_path):
    job = _numerics_job(pool_dir, tmp_path, "eager", "fp16")
    with pytest.raises(ValueError, match=r"unknown numerics 'fp16' \(config key study_a\.sweep\.numerics\)"):
        sweep.run(job)


@pytest.mark.parametrize("numerics,flag", [("tf32", "1"), ("fp32", "0")])
def test_libtorch_sweep_program_runs_under_the_jobs_tf32(pool_dir, tmp_path, numerics, flag):
    """The C++ program gets the job's numerics as --tf32 and runs under it: its start record reads the flags
    back from ATen."""
    from abstraction_cost.measure import numerics as nx
    from abstraction_cost.models import resnet, weights_file
    program = native.ensure_built("libtorch")
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 5).state_dict(), weights)
    config = nx.job_config({"backend_flags": {"tf32": False, "cudnn_benchmark": False}}, numerics,
                           "study_a.sweep.numerics")
    settings = SimpleNamespace(batches=(1,), resolutions=(8,), transfers=("uint8-pinned",), warmup=0, repeats=1,
                               cell_budget_s=None)
    inputs = SimpleNamespace(inputs=str(pool_dir), weights=str(weights))
    command = sweep.sweep_command(program, "libtorch", inputs, transfer.read_manifest(pool_dir), settings, config,
                                  torch.device("cpu"), 5)
    assert command[command.index("--tf32") + 1] == flag
    result = native.launch(command)
    assert result.returncode == 0, result.stderr_tail
    start = result.of_kind("start")[0]
    assert start["tf32_cudnn"] is (flag == "1") and start["tf32_matmul"] is (flag == "1")


def test_bf16_autocast_runs_python_and_leaves_cpp_not_run(pool_dir, tmp_path, process_numerics):
    """bf16-autocast: eager's forward runs under torch.autocast (bfloat16 logits); the C++ program, which has no
    autocast, is not_run with the reason, never silently fp32."""
    from abstraction_cost import tables
    from abstraction_cost.measure import numerics as nx
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    model = sweep.PythonModel("eager", SimpleNamespace(weights=str(weights)), 3, 10, torch.device("cpu"),
                              "bf16-autocast")
    with torch.no_grad():
        assert model.forward(torch.zeros(1, 3, 8, 8)).dtype == torch.bfloat16
    job = _numerics_job(pool_dir, tmp_path, "libtorch", "bf16-autocast")
    sweep.run(job)
    df = tables.read("sweep", job.output.tables[0])
    assert set(df["status"]) == {"not_run"} and set(df["message"]) == {nx.NO_CPP_AUTOCAST}
    assert set(df["numerics"]) == {"bf16-autocast"} and df.height == 2


@pytest.mark.parametrize("key,value,words", [
    ("batches", [8, 0], "study_a.sweep.batches.1"),
    ("resolutions", [64, "128"], "study_a.sweep.resolutions.1"),
    ("transfers", ["float16-pinned"], "study_a.sweep.transfers.0"),
    ("implementations", ["tensorrt"], "study_a.sweep.implementations.0"),
    ("numerics", ["fp32", "fp16"], "study_a.sweep.numerics.1"),
])
def test_config_schema_refuses_bad_sweep_values_naming_the_key(key, value, words):
    from abstraction_cost import config as config_module
    config = config_module.load(REPO / "config/smoke.yaml")
    config["study_a"]["sweep"][key] = value
    with pytest.raises(config_module.ConfigError, match=words.replace(".", r"\.")):
        config_module.validate(config)


@pytest.mark.parametrize("name", ["smoke", "gpu-smoke", "config", "paper"])
def test_every_config_has_a_sweep_that_checks(name):
    from abstraction_cost import config as config_module
    settings = sweep_cells.SweepSettings.from_config(config_module.load(REPO / f"config/{name}.yaml"))
    assert len(settings.batches) >= 2 and len(settings.resolutions) >= 2


# ------------------------------------------------------------------------------------------------- GPU
class GreedyModel(TinyModel):
    """Asks the CUDA allocator for 1 TiB from batch 4 on: a real out-of-memory error, not an injected one."""

    def __init__(self):
        super().__init__()
        conv = self.forward.cuda()
        self.forward = lambda x: torch.empty(1 << 40, dtype=torch.uint8, device=x.device) if x.shape[0] >= 4 \
            else conv(x)


def _cuda_run() -> Run:
    from abstraction_cost.measure.nvml import NvmlReader
    reader, status = NvmlReader.open(None)
    return Run(run_id="gpu-test", device=torch.device("cuda"), sampler=NvmlSampler(reader, 20, status))


@pytest.mark.gpu
def test_python_sweep_on_cuda_records_a_real_oom_and_goes_on(pool_dir):
    run = _cuda_run()
    with run.sampler:
        rows = sweep.python_cells(GreedyModel(), walk([2, 4, 8], [8, 16], ["float32-pinned"]),
                                  transfer.Pool(pool_dir), 1, 3, run)
    assert [r["status"] for r in rows] == ["ok", "oom", "oom", "ok", "oom", "oom"]
    assert "out of memory" in rows[1]["message"].lower() and rows[2]["message"] == \
        "skipped: batch 4 already out of memory at this resolution"
    assert rows[3]["alloc_peak_mib"] is not None and rows[3]["h2d_bytes"] == 2 * 3 * 16 * 16 * 4
    assert torch.cuda.memory_allocated() < 1 << 30  # the failed cells' memory was released


class GreedyScript(torch.nn.Module):
    """A TorchScript module asking the allocator for 1 TiB from batch 4 on."""

    def forward(self, x):
        if x.shape[0] >= 4:
            return torch.empty([1 << 40], dtype=torch.uint8, device=x.device).float()[:5].expand(x.shape[0], 5)
        return x.flatten(1)[:, :5]


@pytest.mark.gpu
def test_an_oom_inside_a_torchscript_module_is_oom_in_python_and_in_cpp(pool_dir, tmp_path):
    """The interpreter wraps torch's OutOfMemoryError in its own error, in Python as in ac_libtorch (and an
    AOTInductor package's runner does the same); the allocator's oom count makes both an oom cell."""
    module = torch.jit.script(GreedyScript())
    module.save(str(tmp_path / "greedy.pt"))
    cells = walk([2, 4, 8], [8], ["float32-pinned"])
    model = TinyModel()
    model.forward = module.cuda()
    run = _cuda_run()
    with run.sampler:
        rows = sweep.python_cells(model, cells, transfer.Pool(pool_dir), 1, 2, run)
    assert [r["status"] for r in rows] == ["ok", "oom", "oom"], [r["message"] for r in rows]
    assert rows[1]["message"].startswith("CUDA out of memory. Tried to allocate 1024.00 GiB")
    program = native.ensure_built("libtorch")
    settings = SimpleNamespace(batches=(2, 4, 8), resolutions=(8,), transfers=("float32-pinned",), warmup=1,
                               repeats=2, cell_budget_s=None)
    inputs = SimpleNamespace(inputs=str(pool_dir), module=str(tmp_path / "greedy.pt"))
    config = {"backend_flags": {"tf32": False, "cudnn_benchmark": False}}
    rows = sweep.native_cells(cells, lambda start, oom_at: sweep.sweep_command(
        program, "torchscript-cpp", inputs, transfer.read_manifest(pool_dir), settings, config, torch.device("cuda"),
        5, start, oom_at), _cuda_run(), "torchscript-cpp")
    assert [r["status"] for r in rows] == ["ok", "oom", "oom"], [r["message"] for r in rows]
    assert rows[1]["message"].startswith("CUDA out of memory. Tried to allocate 1024.00 GiB")


@pytest.mark.gpu
def test_transfer_modes_on_cuda_pin_and_normalise_alike(pool_dir):
    pool = transfer.Pool(pool_dir)
    inputs = {m: transfer.cell_input(pool, 32, 16, m, torch.device("cuda")) for m in sweep_cells.TRANSFERS}
    for data in inputs.values():
        data.load(pool)
    assert [inputs[m].host.is_pinned() for m in sweep_cells.TRANSFERS] == [False, True, True]
    assert inputs["uint8-pinned"].nbytes * 4 == inputs["float32-pageable"].nbytes == 32 * 3 * 16 * 16 * 4
    x = {m: d.to_device() for m, d in inputs.items()}
    torch.cuda.synchronize()
    torch.testing.assert_close(x["uint8-pinned"], x["float32-pageable"])
    torch.testing.assert_close(x["float32-pinned"], x["float32-pageable"])


@pytest.mark.gpu
def test_dynamic_compile_on_cuda_times_every_shape_after_one_checked_build(pool_dir, tmp_path):
    """A real dynamic-shape torch.compile of ResNet-50 over two resolutions and batches: every cell passes the
    output check against eager and is timed, and each shape's first call (the compile, or a recompile where a
    size-1 dimension is specialised) is timed apart."""
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    model = sweep.PythonModel("compiled-default", SimpleNamespace(weights=str(weights)), 3, 10,
                              torch.device("cuda"), compile_shapes="dynamic")
    run = _cuda_run()
    with run.sampler:
        rows = sweep.python_cells(model, walk([2, 4], [8, 16], ["uint8-pinned"]), transfer.Pool(pool_dir), 1, 3,
                                  run)
    assert [r["status"] for r in rows] == ["ok"] * 4, [r.get("message") for r in rows]
    assert all(r["time_ms"] > 0 for r in rows)
    assert all(r["build_s"] > 0 for r in rows)


def test_kernels_from_a_chrome_trace_grouped_by_name_grid_block():
    from abstraction_cost.study_a.sweep.kernels import kernels_from_trace
    trace = {"traceEvents": [
        {"cat": "kernel", "name": "relu", "dur": 4.0, "args": {"grid": [1024, 2, 1], "block": [128, 1, 1]}},
        {"cat": "kernel", "name": "relu", "dur": 6.0, "args": {"grid": [1024, 2, 1], "block": [128, 1, 1]}},
        {"cat": "kernel", "name": "conv", "dur": 30.0, "args": {"grid": [8, 1, 1], "block": [256, 1, 1]}},
        {"cat": "cpu_op", "name": "aten::relu", "dur": 99.0}]}
    rows = kernels_from_trace(trace, top=5)
    assert [(r["rank"], r["kernel"], r["calls"], r["grid"]) for r in rows] == [(1, "conv", 1, "(8,1,1)"),
                                                                            (2, "relu", 2, "(1024,2,1)")]
    assert rows[1]["mean_us"] == 5.0 and rows[1]["share"] == pytest.approx(0.25)
    # below the top ones only ReLU kernels stay, with their rank
    assert [(r["rank"], r["kernel"]) for r in kernels_from_trace(trace, top=1)] == [(1, "conv"), (2, "relu")]
    trace["traceEvents"][2]["dur"] = 1.0
    assert [(r["rank"], r["kernel"]) for r in kernels_from_trace(trace, top=1)] == [(1, "relu")]


def test_kernel_job_without_a_gpu_is_one_not_run_row(pool_dir, tmp_path, process_numerics):
    from abstraction_cost import config as config_module, tables
    from abstraction_cost.study_a.sweep import kernels as sweep_kernels
    config = config_module.load(REPO / "config/smoke.yaml")
    out = SimpleNamespace(table=str(tmp_path / "k.parquet"), env=str(tmp_path / "k.env.parquet"))
    sweep_kernels.run(SimpleNamespace(config=config, input=SimpleNamespace(inputs=str(pool_dir)), output=out,
                                      rule="sweep_kernels_job",
                                      wildcards=SimpleNamespace(implementation="eager", numerics="tf32")))
    df = tables.read("sweep_kernels", out.table)
    assert df["status"].to_list() == ["not_run"] and "no CUDA GPU" in df["message"][0]
    assert df["numerics"].to_list() == ["tf32"]
    assert tables.read("environment", out.env)["tf32_cudnn"].to_list() == [True]


# ------------------------------------------------------------------------------------------- aoti package
def test_aoti_package_exports_again_with_relaxed_dims_where_export_cannot_prove_a_guard(tmp_path, monkeypatch):
    """torch 2.11 on an H100 refused the grid's ranges over a guard every power of two meets: the package is then
    exported with relaxed dynamic dims, and meta.json says so with the guard. (The AOTInductor compile is stubbed:
    on a 2-core CPU it takes minutes; the package's runs are covered by the GPU runs of the sweep.)"""
    from torch._dynamo.exc import UserError, UserErrorType
    from abstraction_cost.study_a import aoti_dynamic
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    guard = "Not all values of side = L['x'].size()[2] in the specified range 64 <= side <= 256 satisfy the " \
            "generated guard ((((-1) + L['x'].size()[2]) // 2) % 2) != 0."
    real, calls = torch.export.export, []

    def export(model, args, dynamic_shapes):
        calls.append(dynamic_shapes[0])
        if len(calls) == 1:
            raise UserError(UserErrorType.CONSTRAINT_VIOLATION, f"Constraints violated (side)!\n  - {guard}")
        return real(model, args, dynamic_shapes=dynamic_shapes)
    monkeypatch.setattr(torch.export, "export", export)
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package",
                        lambda exported, package_path: Path(package_path).write_text(str(exported.range_constraints)))
    meta = aoti_dynamic.package(weights, 3, 10, [8, 32], [64, 256], torch.device("cpu"), tmp_path / "aoti")
    assert meta["status"] == "ok" and meta["shapes"] == f"relaxed: {guard}"
    assert all(isinstance(d, torch.export.Dim) for d in calls[0].values())  # the grid's ranges first
    assert calls[1] == dict.fromkeys((0, 2, 3), torch.export.Dim.DYNAMIC)
    assert aoti_dynamic.read_meta(tmp_path / "aoti")["shapes"] == meta["shapes"]

    other = UserError(UserErrorType.DYNAMIC_CONTROL_FLOW, "not a guard")
    monkeypatch.setattr(torch.export, "export", lambda *a, **k: (_ for _ in ()).throw(other))
    meta = aoti_dynamic.package(weights, 3, 10, [8, 32], [64, 256], torch.device("cpu"), tmp_path / "aoti")
    assert meta["status"] == "error" and "not a guard" in meta["message"]
