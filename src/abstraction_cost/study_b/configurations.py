"""Study B's four configurations and four compile modes, and how a callable is compiled and watched.

Configurations (Goldfarb 2024): `interp` (CPU eager), `cpp` (CPU torch.compile, Inductor C++), `cuda` (GPU eager),
`triton` (GPU torch.compile, Inductor Triton). Compile modes: `default`, `reduce-overhead`, `max-autotune`,
`max-autotune-no-cudagraphs`.

Public API (stable; the vision-model experiments import it too):

    cfg = configuration("triton")                      # Configuration(name, device_type, compiled, eager)
    reason = not_run_reason(cfg, mode, device_setting)  # None, or why this row is recorded as not_run
    prepared = prepare(fn, cfg, mode, example_args, device)   # resets dynamo, compiles, times the first call
    with no_recompile(prepared):                       # raises Recompiled if dynamo compiles anything inside
        ...timed loop calling prepared.fn...

What the CPU rows say about CUDA-graph modes. `reduce-overhead` is `default` plus CUDA graphs, and `max-autotune`
is `max-autotune-no-cudagraphs` plus CUDA graphs; CUDA graphs do not exist on the CPU (Inductor skips them for
CPU tensors), so on the CPU those two modes would silently repeat another mode's measurement. Their CPU rows are
recorded as `not_run` with a message naming the mode whose row holds the measurement (CPU_EQUIVALENT_MODE),
rather than timed twice or dropped.

Eager configurations have no compile mode of their own. In every experiment the eager callable is timed
interleaved with one compiled mode at a time, and its rows carry that mode: `mode` on an eager row names the
compiled run it was paired with, so each (case, mode) has its own eager baseline measured in the same rounds.

Recompilations and graph breaks are read from torch._dynamo.utils.counters: `frames.total` counts every frame
dynamo compiles (a recompile after a guard failure included), `graph_break` counts breaks by reason,
`stats.unique_graphs` the FX graphs produced. torch._dynamo.reset() runs before each compilation, because compiled
code is cached on the code object (every nn.Conv2d shares one forward), so without a reset a second shape would
count as a recompile of the first and, past the cache-size limit, fall back to eager without saying so.

torch is imported by the functions that use it: the workflow reads the compile modes and which (configuration,
mode) runs where (study_b/blocks/registry.py) while it builds its DAG, where importing torch would cost seconds.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import astuple, dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from .. import faults

if TYPE_CHECKING:
    import torch

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
CUDA_GRAPH_MODES = frozenset({"reduce-overhead", "max-autotune"})
# On the CPU a CUDA-graph mode is the same compilation as this mode (see the module docstring).
CPU_EQUIVALENT_MODE = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}


@dataclass(frozen=True)
class Configuration:
    name: str
    device_type: str      # cpu | cuda
    compiled: bool
    eager: str            # the eager configuration on the same device: the baseline of a speedup

    @property
    def pair(self) -> str:
        """The device pair the configuration belongs to: cpu (interp/cpp) or gpu (cuda/triton)."""
        return "gpu" if self.device_type == "cuda" else "cpu"


CONFIGURATIONS: dict[str, Configuration] = {
    "interp": Configuration("interp", "cpu", False, "interp"),
    "cpp": Configuration("cpp", "cpu", True, "interp"),
    "cuda": Configuration("cuda", "cuda", False, "cuda"),
    "triton": Configuration("triton", "cuda", True, "cuda"),
    # not PyTorch: NumPy's matmul on the CPU pair's inputs, timed beside interp and cpp (matmul.extras)
    "numpy": Configuration("numpy", "cpu", False, "interp"),
}
PAIRS = {"cpu": ("interp", "cpp"), "gpu": ("cuda", "triton")}


def configuration(name: str) -> Configuration:
    try:
        return CONFIGURATIONS[name]
    except KeyError:
        raise ValueError(f"unknown configuration {name!r}; allowed: {sorted(CONFIGURATIONS)}") from None


def pair_configurations(pair: str) -> tuple[Configuration, Configuration]:
    try:
        eager, compiled = PAIRS[pair]
    except KeyError:
        raise ValueError(f"unknown pair {pair!r}; allowed: {sorted(PAIRS)}") from None
    return configuration(eager), configuration(compiled)


def check_mode(mode: str) -> str:
    if mode not in COMPILE_MODES:
        raise ValueError(f"unknown compile mode {mode!r}; allowed: {list(COMPILE_MODES)}")
    return mode


def not_run_reason(cfg: Configuration, mode: str, device_setting: str = "auto",
                   cuda_available: bool | None = None) -> str | None:
    """Why (cfg, mode) is recorded as not_run on this machine, or None when it runs.

    device_setting is the config's top-level `device` key: `cpu` keeps timed work off the GPU even where there
    is one. The reason applies to the eager rows of the pair as well, since they are timed with the compiled mode.
    """
    check_mode(mode)
    if cfg.device_type == "cuda":
        if device_setting == "cpu":
            return f"configuration {cfg.name!r} needs the GPU; config key 'device' is 'cpu'"
        if cuda_available is None:
            import torch
            cuda_available = torch.cuda.is_available()
        if not cuda_available:
            return f"configuration {cfg.name!r} needs a CUDA GPU; torch sees none on this machine"
    elif mode in CUDA_GRAPH_MODES:
        return (f"mode {mode!r} on the CPU is mode {CPU_EQUIVALENT_MODE[mode]!r} (CUDA graphs do not exist on "
                f"the CPU); its measurement is the {CPU_EQUIVALENT_MODE[mode]!r} row")
    return None


def device_for(cfg: Configuration) -> torch.device:
    import torch
    if cfg.device_type == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


@dataclass(frozen=True)
class CompileCounters:
    """A snapshot of dynamo's counters; differences between two snapshots say what was compiled in between."""
    frames: int          # frames compiled (each recompilation counts one)
    graphs: int          # FX graphs produced
    graph_breaks: int
    cache_hits: int = 0    # FX graphs Inductor served from its on-disk cache (a warm compile) ...
    cache_misses: int = 0  # ... and those it generated code for (a cold one)

    def __sub__(self, other: "CompileCounters") -> "CompileCounters":
        return CompileCounters(*(a - b for a, b in zip(astuple(self), astuple(other))))

    def describe(self) -> str:
        return (f"{self.graphs} graphs, {self.graph_breaks} graph breaks, Inductor cache {self.cache_hits} hits "
                f"{self.cache_misses} misses")


def compile_counters() -> CompileCounters:
    from torch._dynamo.utils import counters
    return CompileCounters(frames=int(counters["frames"]["total"]),
                           graphs=int(counters["stats"]["unique_graphs"]),
                           graph_breaks=int(sum(counters["graph_break"].values())),
                           cache_hits=int(counters["inductor"]["fxgraph_cache_hit"]),
                           cache_misses=int(counters["inductor"]["fxgraph_cache_miss"]))


@dataclass
class Prepared:
    """A callable ready for timing, with what its first call cost and what it compiled.

    first_call_ms: wall time of the first call, synchronised, compilation included (for eager, the first call
    alone: allocator and library warm-up). frames/graphs/graph_breaks: what that first call compiled, and
    cache_hits/cache_misses how many of its graphs Inductor's cache served (warm) or it generated (cold).
    recompiles: frames compiled after the first call, by warm-up calls (timed loops must keep it unchanged).
    """
    fn: Callable
    configuration: Configuration
    mode: str
    first_call_ms: float
    frames: int = 0
    graphs: int = 0
    graph_breaks: int = 0
    recompiles: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    _after_first: CompileCounters | None = None

    def count_since_first_call(self) -> int:
        if not self.configuration.compiled or self._after_first is None:
            return 0
        return (compile_counters() - self._after_first).frames

    def note_warmup(self) -> None:
        """Record frames compiled since the first call (call it after warm-up, before timing)."""
        self.recompiles = self.count_since_first_call()

    def compile_columns(self) -> dict:
        """The columns every Study B timing row carries about compilation."""
        return {"first_call_ms": self.first_call_ms, "frames_compiled": self.frames, "graphs": self.graphs,
                "graph_breaks": self.graph_breaks, "recompiles": self.recompiles, "cache_hits": self.cache_hits,
                "cache_misses": self.cache_misses}


COMPILE_COLUMNS = ("first_call_ms", "frames_compiled", "graphs", "graph_breaks", "recompiles", "cache_hits",
                   "cache_misses")


def compile_fn(fn: Callable, cfg: Configuration, mode: str, backend: str = "inductor") -> Callable:
    """fn itself for eager configurations; otherwise a fresh torch.compile(fn, mode=mode) after dynamo reset.

    backend other than inductor (tests use "eager": dynamo without code generation) ignores mode.
    dynamic=False: each case is one static shape, so a shape change must show as a recompile, not quietly turn
    into a dynamic-shape kernel. In CUDA-graph modes on the GPU every call first marks a new step, so that
    outputs of the previous replay (discarded by the timing loops) never block the next one.
    """
    import torch

    from ..compile import cache_key
    check_mode(mode)
    if not cfg.compiled:
        return fn
    cache_key.stable()
    torch._dynamo.reset()
    if backend == "inductor":
        compiled = torch.compile(fn, mode=mode, dynamic=False)
    else:
        compiled = torch.compile(fn, backend=backend, dynamic=False)
    compiled = faults.compiled(compiled, mode)
    if cfg.device_type == "cuda" and mode in CUDA_GRAPH_MODES:
        mark_step = torch.compiler.cudagraph_mark_step_begin

        def stepped(*args):
            mark_step()
            return compiled(*args)
        return stepped
    return compiled


def prepare(fn: Callable, cfg: Configuration, mode: str, example_args: Sequence, device: torch.device,
            backend: str = "inductor") -> Prepared:
    """Compile (when cfg is compiled) and call once, timing that first call apart from steady state."""
    import torch

    from ..measure.timing import synchronize
    wrapped = compile_fn(fn, cfg, mode, backend)
    before = compile_counters()
    synchronize(device)
    start = time.perf_counter_ns()
    wrapped(*example_args)
    synchronize(device)
    first_ms = (time.perf_counter_ns() - start) / 1e6
    after = compile_counters()
    compiled = after - before if cfg.compiled else CompileCounters(0, 0, 0)
    if cfg.compiled and compiled.graphs == 0:
        limit = getattr(torch._dynamo.config, "recompile_limit", "?")
        raise NotCompiled(f"{cfg.name}/{mode}: torch.compile produced no graph on the first call: dynamo fell back "
                          f"to eager (its recompile limit hit, torch._dynamo.config.recompile_limit = {limit}, or "
                          "the code was skipped), so the times would be eager's; see TORCH_LOGS=recompiles")
    return prepared_from(wrapped, cfg, mode, first_ms, compiled, after)


def prepared_from(fn: Callable, cfg: Configuration, mode: str, first_ms: float, compiled: CompileCounters,
                  after: CompileCounters) -> Prepared:
    """A Prepared whose first call took first_ms and compiled `compiled`; `after`: the counters after it."""
    return Prepared(fn=fn, configuration=cfg, mode=mode, first_call_ms=first_ms, frames=compiled.frames,
                    graphs=compiled.graphs, graph_breaks=compiled.graph_breaks, cache_hits=compiled.cache_hits,
                    cache_misses=compiled.cache_misses, _after_first=after)


class NotCompiled(RuntimeError):
    """A compiled configuration whose first call compiled nothing: dynamo ran it eagerly."""


class Recompiled(RuntimeError):
    """Dynamo compiled a frame inside a timed loop: the loop's times include compilation."""


@contextmanager
def no_recompile(*prepared: Prepared) -> Iterator[None]:
    """Raise Recompiled if dynamo compiles any frame while the block runs (a recompile in a timed loop)."""
    before = compile_counters()
    yield
    grown = (compile_counters() - before).frames
    if grown and any(p.configuration.compiled for p in prepared):
        names = ", ".join(f"{p.configuration.name}/{p.mode}" for p in prepared)
        raise Recompiled(f"{grown} frame(s) compiled inside the timed loop of {names}; "
                         "its times would include compilation")
