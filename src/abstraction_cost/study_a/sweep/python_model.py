"""A Python implementation's model, shared by the serial walk and the served worker: its build per shape (a compile,
a CUDA graph) checked against eager before it is timed, its warm-up (Warmth), its ooms and its memory returned."""
from __future__ import annotations

import contextlib
import gc
import re
import time
from typing import Callable

import torch
import torch.fx.experimental._config as fx_config

from ... import implementations
from ...compile import cache_key
from ...measure import numerics as nx
from ...measure.output_check import reference
from ...measure.timing import synchronize
from ...models import resnet
from ...models import cuda_graphs
from .. import torchscript
from .cells import Cell, build_kind


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
        self.cache = None  # a compiled build's Inductor cache (hits, misses) in its last build() (compile_warm_up)

    def build(self, example: torch.Tensor) -> float | None:
        """The compiled build's first call at a new input shape, timed apart; None when the model needs no build
        or met this shape already (an earlier transfer mode's cell). per-shape: a fresh static torch.compile per
        shape, so the call is its compile and one run; dynamic: one dynamic-shape torch.compile for the job, so
        the call compiles at the job's first shape, recompiles where dynamo's guards fail, else is one run. The
        call's time is also kept in build_s when it raises: a shape out of memory is often found after its
        compile, which took what a build takes. eager-cudagraphs: a CUDA graph captured per shape (its warm-up
        calls and capture) and one replay."""
        self.build_s = self.cache = None
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
        before = _fx_graph_cache()
        started = time.perf_counter()
        try:
            with self._shapes():
                if self._graphed is not None:
                    self._graphed.capture(example)  # warm-up calls on a side stream, then the capture
                self.forward(example)
            synchronize(example.device)
        finally:
            self.build_s = time.perf_counter() - started
            if self.mode is not None:
                self.cache = tuple(a - b for a, b in zip(_fx_graph_cache(), before))
        self._built_for = example.shape
        return self.build_s

    @contextlib.contextmanager
    def _shapes(self):
        """Where dynamo may compile: a dynamic build reasons size-obliviously, as aoti_dynamic's export does, so
        dynamo does not specialise a size that is 1 at the first shape (ResNet-50's last feature map at 8-32 px)
        into a guard that recompiles the network at the next resolution. Inductor's own guards remain (a
        resolution range from the convolution's memory-format choice at a 1 x 1 feature map, and 32-bit
        indexing), so a grid still gets a few builds per numerics (measured: docs/results/, the default sweep).
        It also specialises float attributes (batch norm's eps and momentum) as it traces: left symbolic,
        AOTAutograd's pass that makes them tensors fails on them after the whole first trace and dynamo traces
        again with them specialised, the same graph one whole trace later (measured: docs/results/, the sweep's
        dynamic build traced once)."""
        if self.compile_shapes != "dynamic":
            yield
            return
        with fx_config.patch(backed_size_oblivious=True), torch._dynamo.config.patch(specialize_float=True):
            yield

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


def _fx_graph_cache() -> tuple[int, int]:
    """Inductor's FX graph cache (hits, misses) in this process so far."""
    from torch._dynamo.utils import counters
    return int(counters["inductor"]["fxgraph_cache_hit"]), int(counters["inductor"]["fxgraph_cache_miss"])


def _stepped(compiled: Callable, mode: str, device: torch.device) -> Callable:
    """A CUDA-graph mode's build (reduce-overhead, max-autotune) marking a new step before each call, as Study B's
    compile_fn does: the last replay's outputs, which the timed loop discards, never hold the next one back."""
    if device.type != "cuda" or mode not in ("reduce-overhead", "max-autotune"):
        return compiled

    def call(*args):
        torch.compiler.cudagraph_mark_step_begin()
        return compiled(*args)
    return call


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


def _release(device: torch.device, collect: bool) -> None:
    """The cell's memory back to the device. After a failed cell the exception's traceback may hold its tensors in
    reference cycles, which only a collection frees; an ok cell's are freed with their last reference, and a full
    collection (0.2 s with torch's objects loaded) per cell would be the sweep's largest overhead."""
    if collect:
        gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
