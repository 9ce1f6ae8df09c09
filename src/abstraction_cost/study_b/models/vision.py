"""Study B's vision models (Fig. 5.6): cases, models, inputs, and the variants the steps time.

A *case* is one (model, pair, mode) at one batch size and resolution. End to end (vision_protocol.py, with
vision_worker.py) times the model eager, the model compiled whole in `mode`, and the extra eager baselines:

- `eager_channels_last`: a copy of the model in channels-last memory format; the call converts its NCHW input,
  so the conversion Inductor also does inside its graph is paid here too. Runs on the CPU as well.
- `eager_cuda_graphs`: the eager model captured once into a CUDA graph (torch.cuda.graph); a call copies its
  input into the graph's static input and replays it. Without a GPU: not_run, with the reason.

Compilation is timed apart (first_call_ms, vision_builds), after a dynamo reset, before any timed call.
Inference runs under eval() and no_grad(), as in the study. Failures become rows: a variant that fails to build
is `error` (or `oom`) with the exception's message and the others are still timed; a recompile inside a timed
block makes that variant `error`, because its times would include compilation.

The job's in-process steps (layers, timing methods; vision_job.py) share one `Loaded`: the model, its blocks and
inputs, and what they share once compiled: the whole model in the layer mode and every block compiled alone
(`units`), built once by ensure_compiled; a compiled worker of the protocol builds the same in its own process.

Blocks compiled one by one (layers.py, selective.py) go through `compile_unit`, which gives every block a
code object of its own: dynamo keeps compiled code per code object, and every nn.Module instance of one class
shares one forward, so compiling seventeen InvertedResiduals as themselves would pile seventeen cache entries
(and guard checks) onto one code object and, past dynamo's recompile limit (8), silently run the rest eager.
compile_units checks that every block did compile a graph of its own.
"""
from __future__ import annotations

import copy
import itertools
import logging
import re
import time
import types
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from torch import nn

from ...compile import cache_key
from ...measure import numerics as nx
from ...measure import output_check
from ...measure.timing import synchronize
from ...models import blocks as model_blocks
from .. import configurations as cfgs
from ..configurations import Configuration, Prepared

VARIANTS = ("eager", "compiled")
# The torch.compile backend of every compiled variant; tests set "eager" (dynamo without code generation).
BACKEND = "inductor"
BASELINES = ("channels_last", "cuda_graphs")


@dataclass(frozen=True)
class Case:
    model: str
    pair: str                 # cpu | gpu
    mode: str                 # compile mode of the compiled side
    batch_size: int
    resolution: int
    seed: int
    warmup: int
    rounds: int
    repeats_per_round: int
    inputs: int               # distinct input tensors the calls rotate through
    flush_l2: bool
    numerics: str = "fp32"    # measure/numerics.py: fp32 | tf32 | bf16-autocast
    memory_format: str = "contiguous"   # of the model's weights and its inputs: contiguous | channels_last

    @property
    def eager(self) -> Configuration:
        return cfgs.configuration(cfgs.PAIRS[self.pair][0])

    @property
    def compiled(self) -> Configuration:
        return cfgs.configuration(cfgs.PAIRS[self.pair][1])

    def columns(self, configuration: Configuration | str) -> dict:
        """The case columns of every row (tables.study_b_models._CASE)."""
        name = configuration if isinstance(configuration, str) else configuration.name
        return {"model": self.model, "pair": self.pair, "configuration": name, "mode": self.mode,
                "batch_size": self.batch_size, "resolution": self.resolution, "numerics": self.numerics,
                "memory_format": self.memory_format}


MEMORY_FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}


@dataclass(frozen=True)
class Setting:
    """One point of the job's axes: batch size, numerics and memory format (study_b.models)."""
    batch_size: int
    numerics: str
    memory_format: str


def batch_sizes(config: dict, pair: str) -> list[int]:
    """study_b.models.batch_size: one size, a list, or {cpu: [...], gpu: [...]} per pair."""
    value = config["study_b"]["models"]["batch_size"]
    if isinstance(value, dict):
        if pair not in value:
            raise ValueError(f"config key study_b.models.batch_size has no entry for pair {pair!r}")
        value = value[pair]
    return [value] if isinstance(value, int) else list(value)


def settings(config: dict, pair: str) -> list[Setting]:
    """Every setting a (model, pair) job measures; the first (first batch size, numerics and memory format of
    the config's lists: the study's batch 1, fp32, contiguous in the shipped configs) is the study's."""
    section = config["study_b"]["models"]
    for key in ("numerics", "memory_formats"):
        if not section.get(key):
            raise ValueError(f"config key study_b.models.{key} must list at least one value")
    for n in section["numerics"]:
        nx.check_numerics(n, "study_b.models.numerics")
    for f in section["memory_formats"]:
        if f not in MEMORY_FORMATS:
            raise ValueError(f"unknown memory format {f!r} (config key study_b.models.memory_formats); "
                             f"allowed: {sorted(MEMORY_FORMATS)}")
    return [Setting(b, n, f) for b in batch_sizes(config, pair) for n in section["numerics"]
            for f in section["memory_formats"]]


def case_from_config(config: dict, model: str, pair: str, mode: str, setting: Setting | None = None) -> Case:
    """The case of study_b.models for one (model, pair, mode) at `setting` (default: the study's, the first);
    names the config key that is at fault."""
    section = config["study_b"]["models"]
    if pair not in cfgs.PAIRS:
        raise ValueError(f"pair {pair!r}: expected one of {sorted(cfgs.PAIRS)} (config key study_b.models.models)")
    if model not in section["models"].get(pair, []):
        raise ValueError(f"model {model!r} is not listed under config key study_b.models.models.{pair}")
    t = section["timing"]
    setting = setting or settings(config, pair)[0]
    return Case(model=model, pair=pair, mode=cfgs.check_mode(mode), batch_size=setting.batch_size,
                resolution=section["resolution"], seed=config["seed"], warmup=t["warmup"], rounds=t["rounds"],
                repeats_per_round=t["repeats_per_round"], inputs=t["inputs"], flush_l2=t["flush_l2"],
                numerics=setting.numerics, memory_format=setting.memory_format)


def not_run_reason(case: Case, config: dict) -> str | None:
    """Why this case cannot run here (no GPU for the gpu pair, a CUDA-graph mode on the CPU, require_gpu on a
    machine without one), or None."""
    if config["study_b"]["models"]["require_gpu"] and not torch.cuda.is_available():
        return ("config key study_b.models.require_gpu is true and torch sees no CUDA GPU on this machine "
                "(the cpu pair runs on the GPU machine, beside the gpu pair)")
    return cfgs.not_run_reason(case.compiled, case.mode, config["device"])


def device_of(case: Case) -> torch.device:
    return cfgs.device_for(case.compiled)


def run_device(case: Case, config: dict) -> torch.device:
    """The device the job's measured_run samples: the pair's, or the CPU where the case cannot run here."""
    return device_of(case) if not_run_reason(case, config) is None else torch.device("cpu")


def load(case: Case, device: torch.device) -> tuple[nn.Module, list[model_blocks.Block]]:
    """The model with the case's seed, on the device in eval mode and the case's memory format, and its blocks."""
    model = model_blocks.build(case.model, case.seed).to(device).eval()
    model = model.to(memory_format=MEMORY_FORMATS[case.memory_format])
    return model, model_blocks.blocks(case.model, model)


def make_inputs(case: Case, device: torch.device) -> list[tuple[torch.Tensor]]:
    """`case.inputs` distinct NCHW inputs drawn from the seed, in the case's memory format (contiguous as a user
    passes them, or channels_last as one who converts the model converts them too)."""
    g = torch.Generator().manual_seed(case.seed)
    shape = model_blocks.input_shape(case.batch_size, case.resolution)
    fmt = MEMORY_FORMATS[case.memory_format]
    return [(torch.randn(shape, generator=g).to(device).contiguous(memory_format=fmt),) for _ in range(case.inputs)]


@dataclass
class Loaded:
    """One (model, pair) on its device, shared by the steps of its job, with what they compiled.

    whole: the whole model compiled (a Prepared, mode included), valid until the next dynamo reset;
    units: every block compiled alone (compile_unit), in the mode of `whole`.
    """
    model: nn.Module
    parts: list[model_blocks.Block]
    inputs: list[tuple[torch.Tensor]]
    device: torch.device
    whole: Prepared | None = None
    units: list[Callable] | None = None
    failure: BaseException | None = None   # why ensure_compiled failed: later steps fail alike, without retrying


def load_case(case: Case) -> Loaded:
    device = device_of(case)
    model, parts = load(case, device)
    return Loaded(model, parts, make_inputs(case, device), device)


_unit_ids = itertools.count()
log = logging.getLogger(__name__)


def _forwarder(module: Callable) -> Callable:
    def unit(x):
        return module(x)
    return unit


def compile_unit(module: Callable, mode: str, label: str) -> Callable:
    """torch.compile of `module` called through a function whose code object is its own.

    The function is a copy of _forwarder's closure with a fresh code object (code.replace under the block's
    name), so its compiled code has a cache of its own. Not exec(): a function made by exec() has no source
    file, and torch before 2.13 routes every such function through one shared wrapper frame (pytorch#124269),
    whose cache then fills after eight blocks. No dynamo reset here (it would drop the other units' code);
    dynamic=False as in configurations.compile_fn.
    """
    name = f"unit_{next(_unit_ids)}_{re.sub(r'[^0-9A-Za-z_]', '_', label)}"
    template = _forwarder(module)
    code = template.__code__.replace(co_name=name, co_qualname=name)
    fn = types.FunctionType(code, template.__globals__, name, None, template.__closure__)
    cache_key.stable()
    if BACKEND != "inductor":
        return torch.compile(fn, backend=BACKEND, dynamic=False)
    return torch.compile(fn, mode=mode, dynamic=False)


class NotCompiled(RuntimeError):
    """A block meant to be compiled ran without dynamo producing a graph for it (its times would be eager)."""


def compile_units(loaded: Loaded, case: Case) -> list[Callable]:
    """Every block compiled alone in case.mode, each compiled by one call on the first input's activations.

    Raises NotCompiled if a block's first call produced no graph, WrongOutput if a block's output differs from
    the eager block's on the same activations."""
    units = [compile_unit(b.module, case.mode, f"{case.model}.{b.name}") for b in loaded.parts]
    x = loaded.inputs[0][0]
    for unit, part in zip(units, loaded.parts):
        ref = output_check.reference(part.module, (x,), case.numerics, loaded.device)
        before = cfgs.compile_counters()
        x = unit(x)
        if (cfgs.compile_counters() - before).graphs < 1:
            raise NotCompiled(f"{case.model} block {part.name}: its first call through torch.compile produced "
                              "no graph (dynamo skipped the frame, e.g. at its recompile limit)")
        result = ref.check(x)
        if not result.ok:
            raise output_check.WrongOutput(f"{case.model} block {part.name} compiled alone: output differs from "
                                           f"eager's: {result.message}")
    synchronize(loaded.device)
    return units


def ensure_compiled(case: Case, loaded: Loaded, run, logger: logging.Logger | None = None) -> None:
    """Build what the layer-mode steps share, unless an earlier step left it: the whole model in case.mode
    (after a dynamo reset, so before any unit) and the units, each in a phase of its own."""
    if loaded.failure is not None:
        raise loaded.failure
    try:
        _build_shared(case, loaded, run, logger or log)
    except Exception as err:
        loaded.failure = err
        raise


def _build_shared(case: Case, loaded: Loaded, run, logger: logging.Logger) -> None:
    if loaded.whole is None or loaded.whole.mode != case.mode:
        loaded.units = None
        with run.phase("whole-build"):
            loaded.whole = prepare_whole(loaded.model, case, loaded.inputs[0], loaded.device)
        output_check.reference(loaded.model, loaded.inputs[0], case.numerics, loaded.device).require(
            loaded.whole.fn, loaded.inputs[0], f"{case.model} compiled whole")
    if loaded.units is None:
        before, start = cfgs.compile_counters(), time.perf_counter()
        with run.phase("units-build"):
            loaded.units = compile_units(loaded, case)
        logger.info("%s: %d blocks compiled one by one in %.1f s (%s)", case.model, len(loaded.units),
                    time.perf_counter() - start, (cfgs.compile_counters() - before).describe())


def prepare_whole(model: nn.Module, case: Case, example: tuple, device: torch.device) -> Prepared:
    """The whole model compiled in the case's mode (configurations.prepare: dynamo reset, first call timed)."""
    return cfgs.prepare(model, case.compiled, case.mode, example, device, backend=BACKEND)


@contextmanager
def refuse_compilation(what: str) -> Iterator[None]:
    """Raise configurations.Recompiled if dynamo compiles any frame inside (a timed loop of compiled units)."""
    before = cfgs.compile_counters()
    yield
    grown = (cfgs.compile_counters() - before).frames
    if grown:
        raise cfgs.Recompiled(f"{grown} frame(s) compiled inside the timed loop of {what}; "
                              "its times would include compilation")


def channels_last(model: nn.Module) -> Callable:
    cl = copy.deepcopy(model).to(memory_format=torch.channels_last)

    def call(x):
        return cl(x.contiguous(memory_format=torch.channels_last))
    return call


def status_of(err: BaseException) -> str:
    if isinstance(err, output_check.WrongOutput):
        return "wrong_output"
    return "oom" if isinstance(err, torch.cuda.OutOfMemoryError) else "error"


def message_of(err: BaseException) -> str:
    """The row's message for a failure; the traceback goes to the rule's log."""
    log.error("recorded as a failed row", exc_info=err)
    text = str(err).strip().splitlines()
    fix = "; lower study_b.models.batch_size or resolution to fit" if status_of(err) == "oom" else ""
    return f"{type(err).__name__}: {(text[0] if text else '')[:400]}{fix}"


def prepare_timed(fn: Callable, configuration: Configuration, mode: str, example: tuple,
                  device: torch.device) -> Prepared:
    """An already-built callable (compiled units inside, or none) as a Prepared, its first call timed."""
    before = cfgs.compile_counters()
    synchronize(device)
    t0 = time.perf_counter_ns()
    fn(*example)
    synchronize(device)
    first_ms = (time.perf_counter_ns() - t0) / 1e6
    after = cfgs.compile_counters()
    return cfgs.prepared_from(fn, configuration, mode, first_ms, after - before, after)
