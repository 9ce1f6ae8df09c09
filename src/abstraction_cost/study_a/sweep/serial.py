"""Study A's inference sweep: one process per implementation walks every cell of resolution × batch × input
transfer mode (sweep_cells: order, oom skipping, fault hook) in each numerics in turn, and writes one row per cell.

Each numerics (study_a.sweep.numerics, measure/numerics.py) has its own measured run, set before its model is
built, as in the backend comparison's eval job: the TF32 flags by measured_run (recorded in its environment row)
and passed to the C++ programs as --tf32; bf16-autocast wraps the Python forward (and a compiled build's first call)
in torch.autocast, and the C++ programs, which have no autocast, are not_run.

    implementation       runtime  the model                                      build
    eager                python   models.resnet.resnet50 (nn.Module)             none
    eager-cudagraphs     python   eager's forward as a CUDA graph per shape      per-shape: the capture is the
                                  (cuda_graphs.py; CUDA GPU only)                build, timed in build_s, its
                                                                                 output checked as compiled's
    torchscript-python   python   torch.jit.load of the scripted module          none (shape-independent)
    compiled-static-<mode> python torch.compile(eager, mode, dynamic=False)      per-shape, whatever compile_shapes
    compiled-<mode>      python   torch.compile(eager, mode, dynamic=...)        study_a.sweep.compile_shapes:
                                                                                 per-shape, a fresh static build
                                                                                 per batch × resolution; dynamic,
                                                                                 one dynamic-shape build for the
                                                                                 job. Each shape's first call is
                                                                                 timed as build_s (on the row of
                                                                                 its first transfer mode; the
                                                                                 others run the same build), its
                                                                                 output checked against eager's
                                                                                 on the cell's input
    torchscript-cpp      cpp      ac_libtorch sweep --model torchscript          none
    libtorch             cpp      ac_libtorch sweep --model libtorch             none
    aoti                 cpp      ac_libtorch sweep --model aoti                 dynamic: one package with dynamic
                                                                                 batch and resolution (aoti_dynamic)
    cudnn, cudnn-graphs  cpp      ac_cudnn sweep --model cudnn[-graphs]          none (activations per cell; the
                                                                                 graph captured per cell, untimed)

Per cell, in Python as in C++ (native/common/sweep.h): the device input buffer is made and zeroed (untimed), on a
cold cell (a shape's first, the first uint8-pinned, or a new CUDA graph: Warmth, SweepBackend::prepare) `warmup`
calls are queued on it (so a shape out of memory fails before its host input is made), the host input is made
while the device runs them (untimed), then `repeats` timed calls, fewer once they took
study_a.sweep.cell_budget_s (sweep_cells.more_repeats), each synchronised before it starts; CUDA events from
before the host-to-device copy to the logits, and one after the copy: the copy's own time comes from the same
calls. A
compiled build is timed only once its logits on the cell's input are eager's within the numerics' tolerance
(measure/output_check.py); else its cells are `wrong_output`, untimed. A C++ program writes each measured cell's
last logits (--logits-dir), which the job checks against eager's once the program has ended (sweep_check.py): a
cell that differs becomes `wrong_output` and loses its times. An out-of-memory cell becomes an `oom`
row with the allocator's first message line, its memory is released and the walk goes on; any other exception is
an `error` row. A C++ program streams its records; when it dies, the job restarts it from the cell after the one
it died in (--start-cell), which becomes an `error` row with the exit status, and tells it which cells were oom
(--oom-at) so the skip rule holds.
Each cell's row is kept on disk as it completes (sweep_store.CellStore): a job killed after hours resumes at the
first cell without a row, in Python as in C++ (--start-cell, --oom-at from the kept ooms), under the same run_id.
"""
from __future__ import annotations

import contextlib
import gc
import itertools
import logging
import re
import tempfile
import time
import traceback
from pathlib import Path
from typing import Callable

import torch
import torch.fx.experimental._config as fx_config

from ... import implementations, tables
from ...compile import cache_key
from ...data.specs import spec
from ...measure import device as devices
from ...measure import numerics as nx
from ...measure.output_check import WrongOutput, reference
from ...measure.run import Run, measured_run
from ...measure.timing import StepTimer, synchronize
from ...models import resnet
from ...programs import native
from .. import aoti_dynamic, cuda_graphs, cudnn, torchscript
from ..transfer import Pool, cell_input
from .cells import Cell, OomTracker, SweepSettings, faults, kill_job, kills, more_repeats, timed_columns
from .check import check_logits
from .store import CellStore, cells_dir, interrupted, job_key

log = logging.getLogger(__name__)

# implementation -> the C++ program's --model (implementations.py)
NATIVE_MODELS = {name: impl.native_model for name, impl in implementations.REGISTRY.items()
                 if impl.native_model is not None and "sweep" in impl.experiments}


def kind(implementation: str) -> tuple[str, str]:
    """A sweep job's (backend, runtime)."""
    impl = implementations.get(implementation)
    return impl.backend, impl.runtime


def build_kind(implementation: str, compile_shapes: str = "per-shape") -> str:
    """The sweep's build column: none, dynamic, or per-shape (a compile entry's as study_a.sweep.compile_shapes)."""
    build = implementations.get(implementation).sweep_build
    return compile_shapes if build == "compile_shapes" else build


class InjectedCrash(RuntimeError):
    """AC_SWEEP_FAULT=crash@K in a Python process: the cell fails as a crash would, and the walk goes on."""


# --------------------------------------------------------------------------------------------- Python
class PythonModel:
    """The model of a Python implementation; build(cell) makes it ready for the cell's shape (untimed)."""

    def __init__(self, implementation: str, inputs, channels: int, classes: int, device: torch.device,
                 numerics: str = "fp32", compile_shapes: str = "per-shape"):
        self.implementation, self.numerics, self.device = implementation, numerics, device
        self.compile_shapes = build_kind(implementation, compile_shapes)  # compiled-static: per-shape always
        if implementation == "torchscript-python":
            self.module = torchscript.load(inputs.module, device)
        else:
            self.module = resnet.load_eval(inputs.weights, channels, classes, device)
        self.mode = implementations.split(implementation)[1]  # a compile entry's mode, else None
        self.forward = nx.under(numerics, self.module, device)
        # eager-cudagraphs: eager's forward captured as a CUDA graph per shape (cuda_graphs.py), built like a compile
        self._graphed = cuda_graphs.GraphedForward(self.module, numerics) \
            if implementation == "eager-cudagraphs" else None
        self.builds = self.mode is not None or self._graphed is not None  # a build per shape, checked against eager
        self._compiled = False
        self._built_for = self._checked_for = None  # input shapes the compiled build last met, and its check's
        self._reference = None  # eager's output on the cell's input that the next check compares with
        self.build_s = None  # the last build()'s first call, also when it failed (an oom after its compile)

    def build(self, example: torch.Tensor) -> float | None:
        """The compiled build's first call at a new input shape, timed apart; None when the model needs no build
        or met this shape already (an earlier transfer mode's cell). per-shape: a fresh static torch.compile per
        shape, so the call is its compile and one run; dynamic: one dynamic-shape torch.compile for the job, so
        the call compiles at the job's first shape, recompiles where dynamo's guards fail, else is one run. The
        call's time is also kept in build_s when it raises: a shape out of memory is often found after its
        compile, which took what a build takes. eager-cudagraphs: a CUDA graph captured per shape (its warm-up
        calls and capture) and one replay."""
        self.build_s = None
        if not self.builds or example.shape == self._built_for:
            return None
        if self._graphed is not None:
            self._checked_for = None
            self.forward = self._graphed
            self._graphed.graphed = None  # the last shape's graph and its pool, let go before this shape's
        elif self.compile_shapes == "per-shape" or not self._compiled:
            cache_key.stable()  # the next job (the kernel table's, a resumed sweep) may hit this build's entries
            torch._dynamo.reset()
            self._checked_for = None
            self.forward = nx.under(self.numerics, _stepped(torch.compile(
                self.module, mode=self.mode, dynamic=self.compile_shapes == "dynamic"), self.mode, self.device),
                                    self.device)
            self._compiled = True
        self._built_for = None
        started = time.perf_counter()
        try:
            with self._shapes():
                if self._graphed is not None:
                    self._graphed.capture(example)  # warm-up calls on a side stream, then the capture
                self.forward(example)
            synchronize(example.device)
        finally:
            self.build_s = time.perf_counter() - started
        self._built_for = example.shape
        return self.build_s

    def _shapes(self):
        """Where dynamo may compile: a dynamic build reasons size-obliviously, as aoti_dynamic's export does, so
        dynamo does not specialise a size that is 1 at the first shape (ResNet-50's last feature map at 8-32 px)
        into a guard that recompiles the network at the next resolution. Inductor's own guards remain (a
        resolution range from the convolution's memory-format choice at a 1 x 1 feature map, and 32-bit
        indexing), so a grid still gets a few builds per numerics (measured: docs/results/, the default sweep)."""
        if self.compile_shapes != "dynamic":
            return contextlib.nullcontext()
        return fx_config.patch(backed_size_oblivious=True)

    def needs_reference(self, shape: torch.Size) -> bool:
        """Whether a cell of input `shape` brings a compiled build whose output check is due."""
        return self.builds and shape != self._built_for

    def take_reference(self, cell_input: Callable[[], torch.Tensor]) -> None:
        """Eager's logits on the cell's input (cell_input(), made for it), taken before a new shape's build: the
        check needs them, and a shape whose eager forward does not fit is an oom before minutes of compiling. The
        last shape's reference, kept where its check failed, is let go first: it holds that shape's input."""
        self._reference = None
        try:
            self._reference = reference(self.module, (cell_input(),), self.numerics, self.device)
        except torch.OutOfMemoryError as err:
            raise torch.OutOfMemoryError(f"eager's forward for the output check, before the build: "
                                         f"{_oom_line(err)}") from err

    def check(self, cell_input: Callable[[], torch.Tensor]) -> None:
        """Correct before fast: a compiled build's logits on the cell's input (cell_input(), the same batch the
        reference was taken on) against eager's, once per shape it meets; WrongOutput when they differ beyond the
        numerics' tolerance."""
        if not self.builds or self._checked_for == self._built_for:
            return
        self._reference.require(self.forward, (cell_input(),),
                                f"{self.implementation} at input {tuple(self._built_for)}")
        self._checked_for, self._reference = self._built_for, None


def _stepped(compiled: Callable, mode: str, device: torch.device) -> Callable:
    """A CUDA-graph mode's build (reduce-overhead, max-autotune) marking a new step before each call, as Study B's
    compile_fn does: the last replay's outputs, which the timed loop discards, never hold the next one back."""
    if device.type != "cuda" or mode not in ("reduce-overhead", "max-autotune"):
        return compiled

    def call(*args):
        torch.compiler.cudagraph_mark_step_begin()
        return compiled(*args)
    return call


def oom_count(device: torch.device) -> int:
    """The caching allocator's count of allocations it could not satisfy ("num_ooms"; 0 off the GPU). An oom
    inside a TorchScript module reaches Python as a RuntimeError of the interpreter, not torch.OutOfMemoryError,
    so the count is what tells it apart (the C++ programs do the same: native/libtorch/sweep.cpp)."""
    return torch.cuda.memory_stats(device).get("num_ooms", 0) if device.type == "cuda" else 0


def _oom_line(err: BaseException) -> str:
    """The allocator's own line, also from an error that wraps it; else the error's first line."""
    lines = [line.strip() for line in str(err).splitlines()]
    found = next((line for line in lines if "out of memory" in line), lines[0] if lines else "")
    return re.sub(r"^[\w.]*Error: ", "", found)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def python_cells(model: PythonModel, cells: list[Cell], pool: Pool, warmup: int, repeats: int, run: Run,
                 store: CellStore | None = None, budget_s: float | None = None) -> list[dict]:
    """One row per cell; with a store, each kept as it completes, and those an interrupted attempt kept are
    taken back, not measured. The device's memory is returned between shapes and after a failed cell, not
    between the modes of one shape: they share its allocations, and only a cold cell (Warmth) has warm-up calls."""
    kept = _kept_rows(store, cells)
    tracker, injected, kill, rows = _tracker_of(kept, cells), faults(), kills(), []
    attempt, warmth = _next_attempt(kept), Warmth()
    for cell in cells:
        if cell.index in kept:
            rows.append(kept[cell.index])
            continue
        row = {**_cell_columns(cell), "attempt": attempt}
        skip = tracker.skip_message(cell)
        if skip is not None:
            row.update(status="oom", message=skip)
            rows.append(_keep(store, row, kill))
            continue
        if warmth.leaves_shape(cell):
            _release(run.device, collect=False)
        name = f"cell{cell.index}"
        data, model.build_s = None, None
        ooms = oom_count(run.device)
        try:
            with torch.no_grad(), run.phase(name):
                if injected.get(cell.index) == "oom":
                    raise torch.OutOfMemoryError("injected out of memory (AC_SWEEP_FAULT)")
                if injected.get(cell.index) == "crash":
                    raise InjectedCrash("injected crash (AC_SWEEP_FAULT)")
                if injected.get(cell.index) == "wrong":
                    raise WrongOutput("injected wrong output (AC_SWEEP_FAULT)")
                started = time.perf_counter()
                data = cell_input(pool, cell.batch, cell.resolution, cell.transfer, run.device)
                synchronize(run.device)
                prepare_s = time.perf_counter() - started
                if model.needs_reference(data.device_buffer.shape):
                    started = time.perf_counter()
                    data.load(pool)
                    prepare_s += time.perf_counter() - started
                    model.take_reference(data.to_device)
                row["build_s"] = model.build(data.model_input())
                row["warmup_calls"] = warmth.calls(cell, warmup)
                for _ in range(row["warmup_calls"]):
                    model.forward(data.model_input())
                started = time.perf_counter()
                if data.host is None:
                    data.load(pool)  # on the host while the device runs the warm-up
                row["prepare_s"] = prepare_s + time.perf_counter() - started
                synchronize(run.device)
                model.check(data.to_device)
                times, copies = StepTimer(run.device), StepTimer(run.device)
                first = None
                for done in itertools.count():
                    synchronize(run.device)
                    first = first or time.perf_counter()
                    if not more_repeats(done, time.perf_counter() - first, repeats, budget_s):
                        break
                    with times.step():
                        with copies.step():
                            data.copy()
                        model.forward(data.model_input())
                times_ms, h2d_ms = times.elapsed_ms(), copies.elapsed_ms()
            row.update(status="ok", message=None, h2d_bytes=data.nbytes,
                       **timed_columns(cell.batch, times_ms, h2d_ms), **run.measures(name))
            warmth.ran(cell)
        except WrongOutput as err:
            row.update(status="wrong_output", message=str(err))
        except Exception as err:
            # inside TorchScript's interpreter an oom is a RuntimeError: the allocator's count tells
            if isinstance(err, torch.OutOfMemoryError) or oom_count(run.device) > ooms:
                tracker.add(cell)
                row.update(status="oom", message=_oom_line(err))
            else:
                log.error("cell %s failed:\n%s", cell, traceback.format_exc())
                row.update(status="error", message=_first_line(err))
        finally:
            data = None
            if row.get("status") != "ok":
                row.setdefault("build_s", model.build_s)  # a build that failed took its time all the same
                _release(run.device, collect=True)
                warmth.released()
        if row["status"] != "ok" and name in run.sampler.phases:
            row.update(run.measures(name))
        log.info("cell %d (batch %d, %d px, %s): %s %s", cell.index, cell.batch, cell.resolution, cell.transfer,
                 row["status"], row.get("time_ms") or row.get("message"))
        rows.append(_keep(store, row, kill))
    _release(run.device, collect=False)
    return rows


class Warmth:
    """Which cells get the warm-up calls (native/common/sweep.h asks its backend the same): a cold one, the first
    of its shape since the device's memory was returned (its allocations, algorithm choices and build are new),
    or the process's first uint8-pinned cell (its normalisation's first run). The shape's other modes follow on
    the same allocations and choices, warm: a warm-up there would only repeat a timed call."""

    def __init__(self):
        self.shape, self.uint8_ran = None, False

    def leaves_shape(self, cell: Cell) -> bool:
        """Whether the device holds another shape's state, to be returned before this cell."""
        leaving = self.shape is not None and self.shape != (cell.batch, cell.resolution)
        if leaving:
            self.released()
        return leaving

    def calls(self, cell: Cell, warmup: int) -> int:
        cold = self.shape is None or (cell.transfer == "uint8-pinned" and not self.uint8_ran)
        self.shape = (cell.batch, cell.resolution)
        return warmup if cold else 0

    def ran(self, cell: Cell) -> None:
        self.uint8_ran |= cell.transfer == "uint8-pinned"

    def released(self) -> None:
        self.shape = None


# ------------------------------------------------------------------------------------------- kept cells
def _kept_rows(store: CellStore | None, cells: list[Cell]) -> dict[int, dict]:
    kept = {i: row for i, row in (store.rows() if store is not None else {}).items() if i < len(cells)}
    if kept:
        log.info("%d of %d cells kept from an interrupted attempt of run %s, not measured again: %s", len(kept),
                 len(cells), store.run_id, ",".join(map(str, sorted(kept))))
    return kept


def _tracker_of(kept: dict[int, dict], cells: list[Cell]) -> OomTracker:
    """The oom-skip rule as the kept cells left it."""
    tracker = OomTracker()
    for index, row in kept.items():
        if _tried_oom(row):
            tracker.add(cells[index])
    return tracker


def _tried_oom(row: dict) -> bool:
    return row["status"] == "oom" and not str(row.get("message")).startswith("skipped:")


def _next_attempt(kept: dict[int, dict]) -> int:
    """Processes of the job are numbered on across a resume: the first after it follows the kept cells' last."""
    return max((row.get("attempt") or 0) for row in kept.values()) + 1 if kept else 0


def _keep(store: CellStore | None, row: dict, kill: set[int]) -> dict:
    """The cell's row, kept now (unless the job's interruption may have ended it: sweep_store.interrupted)."""
    if store is not None and not interrupted(row):
        row = store.keep(row)
    if row["cell"] in kill:
        kill_job()
    return row


def _release(device: torch.device, collect: bool) -> None:
    """The cell's memory back to the device. After a failed cell the exception's traceback may hold its tensors in
    reference cycles, which only a collection frees; an ok cell's are freed with their last reference, and a full
    collection (0.2 s with torch's objects loaded) per cell would be the sweep's largest overhead."""
    if collect:
        gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------------ C++
def sweep_command(program, implementation: str, inputs, manifest: dict, settings: SweepSettings, config: dict,
                  device: torch.device, classes: int, start_cell: int = 0, oom_at: str = "",
                  logits_dir: Path | None = None) -> list[str]:
    """ac_libtorch sweep (or ac_cudnn sweep): flags of native/{libtorch,cudnn}/sweep.cpp and native/common/sweep.h."""
    model = NATIVE_MODELS[implementation]
    numbers = lambda xs: ",".join(repr(float(x)) for x in xs)  # noqa: E731
    command = [program, "sweep", "--model", model, *native.common_flags(config, device),
               "--channels", manifest["channels"], "--pool", manifest["pool"], "--inputs", inputs.inputs,
               "--mean", numbers(manifest["mean"]), "--std", numbers(manifest["std"]),
               "--batches", ",".join(map(str, settings.batches)),
               "--resolutions", ",".join(map(str, settings.resolutions)),
               "--warmup", settings.warmup, "--repeats", settings.repeats,
               "--cell-budget-s", settings.cell_budget_s or 0,
               "--transfers", ",".join(settings.transfers), "--start-cell", start_cell]
    if oom_at:
        command += ["--oom-at", oom_at]
    if logits_dir is not None:
        command += ["--logits-dir", logits_dir]
    if model == "libtorch" or model in cudnn.IMPLEMENTATIONS:
        command += ["--weights", inputs.weights, "--classes", classes]
    elif model == "torchscript":
        command += ["--module", inputs.module]
    else:
        command += ["--module", Path(inputs.package) / aoti_dynamic.PACKAGE]
    if model in cudnn.IMPLEMENTATIONS:  # study_a.cudnn's algorithm choice instead of torch's cudnn.benchmark
        command = cudnn.with_conv_flags([str(c) for c in command], config)
    return [str(c) for c in command]


def _native_row(record: dict, attempt: int, run: Run) -> dict:
    row = {"cell": record["cell"], "batch_size": record["batch"], "resolution": record["resolution"],
           "transfer": record["transfer"], "status": record["status"], "message": record.get("message"),
           "attempt": attempt}
    if "start_monotonic_s" in record:
        name = f"cell{record['cell']}"
        native.mark_phase(run, name, record)
        row.update(native.phase_measures(run, name, record))
    if record["status"] == "ok":
        row.update(h2d_bytes=record["h2d_bytes"], prepare_s=record["prepare_s"],
                   warmup_calls=record["warmup_calls"],
                   **timed_columns(record["batch"], record["times_ms"], record["h2d_ms"]))
    return row


def native_cells(cells: list[Cell], command_for, run: Run, name: str = "program",
                 store: CellStore | None = None) -> list[dict]:
    """Runs the program until every cell has a row, restarting it after a crash from the next cell.
    command_for(start_cell, oom_at) is its command line (sweep_command's, or a test program's). With a store,
    each cell's row is kept as its record arrives, and an interrupted attempt's kept cells are not measured: the
    program starts at the first cell without a row, told the kept ooms (--oom-at)."""
    rows = _kept_rows(store, cells)
    tracker, kill = _tracker_of(rows, cells), kills()
    start, attempt = _next_missing(rows, cells, 0), _next_attempt(rows)
    while start < len(cells):
        seen = {"started": False}
        records = []
        launched = time.perf_counter()

        def on_record(record: dict) -> None:
            if record["kind"] == "sweep_start":
                seen["started"] = True
                log.info("%s: program started in %.1f s (from cell %d)", name, time.perf_counter() - launched, start)
            elif record["kind"] == "cell":
                records.append(record)
                if _tried_oom(record):
                    tracker.add(cells[record["cell"]])
                if record["cell"] not in rows:
                    rows[record["cell"]] = _keep(store, _native_row(record, attempt, run), kill)

        command = command_for(start, tracker.flag())
        result = native.launch(command, on_record=on_record, logger=log)
        if result.returncode == 0 and result.of_kind("sweep_done"):
            break
        status, message = result.failure() or ("error", "the program ended without its sweep_done record")
        if not seen["started"]:  # it never reached the cells: every remaining cell fails the same way
            for cell in cells[start:]:
                rows.setdefault(cell.index, {**_cell_columns(cell), "status": status, "message": message,
                                             "exit_status": result.returncode, "attempt": attempt})
            break
        crashed = max((r["cell"] for r in records), default=start - 1) + 1
        if crashed >= len(cells):
            break
        cell = cells[crashed]
        start = _next_missing(rows, cells, crashed + 1)
        log.warning("%s died in cell %d (batch %d, %d px, %s): %s; restarting from cell %d", name,
                    crashed, cell.batch, cell.resolution, cell.transfer, message, start)
        if crashed not in rows:
            rows[crashed] = _keep(store, {**_cell_columns(cell), "status": status, "message": message,
                                          "exit_status": result.returncode, "attempt": attempt}, kill)
        attempt += 1
    return [rows[i] for i in sorted(rows)]


def _next_missing(rows: dict[int, dict], cells: list[Cell], after: int) -> int:
    """The first cell from `after` on without a row (len(cells): none)."""
    return next((c.index for c in cells[after:] if c.index not in rows), len(cells))


# ------------------------------------------------------------------------------------------------ job
def _cell_columns(cell: Cell) -> dict:
    return {"cell": cell.index, "batch_size": cell.batch, "resolution": cell.resolution, "transfer": cell.transfer}


def _not_run_rows(cells: list[Cell], status: str, message: str) -> list[dict]:
    return [{**_cell_columns(c), "status": status, "message": message} for c in cells]


def sweep_rows(implementation: str, inputs, settings: SweepSettings, config: dict, classes: int, run: Run,
               store: CellStore | None = None, numerics: str = "fp32") -> list[dict]:
    cells = settings.cells()
    if settings.require_gpu and run.device.type != "cuda":
        return _not_run_rows(cells, "not_run", "no CUDA GPU on this machine and study_a.sweep.require_gpu is true")
    reason = implementations.get(implementation).not_run_reason(numerics, run.device.type)
    if reason is not None:
        return _not_run_rows(cells, "not_run", reason)
    pool = Pool(inputs.inputs)
    if implementation == "aoti":
        meta = aoti_dynamic.read_meta(inputs.package)
        if meta["status"] != "ok":
            return _not_run_rows(cells, meta["status"], meta.get("message") or "no package")
    if kind(implementation)[1] == "cpp":
        with _logits_dir(store) as logits_dir:
            def command_for(start: int, oom_at: str) -> list[str]:
                return sweep_command(inputs.program, implementation, inputs, pool.manifest, settings, config,
                                     run.device, classes, start, oom_at, logits_dir)
            started = time.perf_counter()
            rows = native_cells(cells, command_for, run, implementation, store)
            walked = time.perf_counter()
            rows = check_logits(rows, logits_dir, implementation, inputs.weights, pool, classes, numerics,
                                run.device)
            # where a C++ job's time outside its timed calls goes (benchmarks/sweep_overhead.py counts the total)
            log.info("%s: program runs %.1f s, logits check %.1f s", implementation, walked - started,
                     time.perf_counter() - walked)
            return rows
    model = PythonModel(implementation, inputs, pool.manifest["channels"], classes, run.device, numerics,
                        settings.compile_shapes)
    return python_cells(model, cells, pool, settings.warmup, settings.repeats, run, store, settings.cell_budget_s)


@contextlib.contextmanager
def _logits_dir(store: CellStore | None):
    """Where the C++ program writes each cell's logits: beside the kept cells (a resumed job checks those again;
    they go when the store is cleared), else a temporary directory."""
    if store is not None:
        (store.directory / "logits").mkdir(exist_ok=True)
        yield store.directory / "logits"
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def run(snakemake) -> None:
    """Rule sweep: one implementation over every cell, in each numerics of params.numerics (one table and one
    environment row each, output.tables and output.envs in that order), in one process: start-up (interpreter,
    torch, CUDA context; the C++ programs' Python side) is paid once per implementation, and the numerics it
    compares are measured by one process on one GPU. Each numerics' cells are kept as they complete and cleared
    only once every numerics is written: a job killed in its second numerics takes the first's back."""
    implementation = snakemake.wildcards.implementation
    outputs = zip(snakemake.params.numerics, snakemake.output.tables, snakemake.output.envs, strict=True)
    stores = [_run_numerics(snakemake, implementation, numerics, table, env) for numerics, table, env in outputs]
    for store in stores:
        store.clear()


def _run_numerics(snakemake, implementation: str, numerics: str, table_path: str, env_path: str) -> CellStore:
    inputs = snakemake.input
    config = nx.job_config(snakemake.config, numerics, "study_a.sweep.numerics")
    settings = SweepSettings.from_config(config)
    dataset = config["study_a"]["backends"]["dataset"]
    classes = spec(dataset, config).classes
    device = devices.select(config)
    backend, runtime = kind(implementation)
    build = build_kind(implementation, settings.compile_shapes)
    build_s = aoti_dynamic.read_meta(inputs.package).get("prepare_s") if implementation == "aoti" else None
    base = {"implementation": implementation, "backend": backend, "runtime": runtime, "numerics": numerics,
            "device": device.type, "dataset": dataset, "build": build, "attempt": 0}
    job = {"implementation": implementation, "numerics": numerics}
    # measured cells kept beside the table as each completes: a killed job's rerun measures only the rest
    store = CellStore(cells_dir(table_path), job_key(config, job, _named(inputs)))
    started = time.perf_counter()
    with measured_run(config, rule=snakemake.rule, job=job, env_path=env_path, device=device, run_id=store.run_id,
                      resumes=store.resumes) as measured:
        try:
            rows = sweep_rows(implementation, inputs, settings, config, classes, measured, store, numerics)
        except Exception as err:  # the process could not start its walk: every cell says why
            log.error("%s/%s failed:\n%s", numerics, implementation, traceback.format_exc())
            rows = _not_run_rows(settings.cells(), "error", _first_line(err))
        defaults = dict.fromkeys(tables.schema("sweep"))
        table = [{**defaults, **base, "build_s": build_s, "run_id": measured.run_id, **row} for row in rows]
    tables.write("sweep", table, table_path)
    ok = sum(r["status"] == "ok" for r in table)
    log.info("%s/%s: %d of %d cells ok, %.1f s", numerics, implementation, ok, len(table),
             time.perf_counter() - started)
    return store


def _named(values) -> dict:
    """Snakemake's named input list or a test's namespace, as {name: value}."""
    return dict(values.items()) if hasattr(values, "items") else dict(vars(values))
