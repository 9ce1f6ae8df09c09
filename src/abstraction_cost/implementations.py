"""Study A's implementations of ResNet-50: the one list every other list derives from.

Config checks (config.py fills the schemas' enums, sweep_cells.check), the rules' input functions
(workflow/rules/common.smk), the eval and sweep jobs, the C++ command lines and the report's order all read
REGISTRY; a new implementation is one entry here plus the code that runs it. The entries' order is the report's.

An entry says what a job needs to run it: its runtime (python: this process; cpp: `program` with `--model
native_model`), the experiments it takes part in (EXPERIMENTS) and the artifact a build rule makes for each, the
numerics it can run (measure/numerics.py; any other is a not_run row naming the reason) and whether it needs a
CUDA GPU (elsewhere its rows are not_run with gpu_reason). A compile entry (compile_modes) is
one job per study_a.sweep.compile_modes entry, named `<name>-<mode>`.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Iterator

EXPERIMENTS = ("backends", "sweep")  # study_a.backends (the backend comparison) and study_a.sweep
ALL_NUMERICS = ("fp32", "tf32", "bf16-autocast", "cudnn-benchmark")  # measure/numerics.NUMERICS (a test checks)
CPP_NUMERICS = ("fp32", "tf32", "cudnn-benchmark")  # the C++ programs take --tf32, --cudnn-benchmark; no autocast
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class Implementation:
    name: str
    backend: str                  # the tables' backend column
    runtime: str                  # python | cpp
    method: str                   # how the model is made (backend_eval's method column)
    experiments: tuple[str, ...]  # of EXPERIMENTS
    numerics: tuple[str, ...] = ALL_NUMERICS
    program: str | None = None    # the C++ program (native.program_path's key): libtorch | cudnn
    native_model: str | None = None  # the program's --model
    # experiment -> what a build rule makes for it: torchscript | aoti (static: the backend comparison's batch
    # and resolution) | aoti-dynamic (one package with dynamic batch and resolution)
    artifacts: dict = field(default_factory=dict, compare=False)
    sweep_build: str = "none"     # the sweep's build column: none | dynamic | per-shape | compile_shapes (config)
    gpu_only: bool = False
    compile_modes: bool = False   # one job per compile mode, <name>-<mode>
    baseline: bool = False        # a baseline users run beyond the study's implementations: shown in every table
                                  # and figure, left out of the study's findings (in_study)
    gpu_reason: str = "{name} runs on a CUDA GPU only, and this run's device is {device}"

    def not_run_reason(self, numerics: str, device_type: str) -> str | None:
        """Why this implementation cannot run `numerics` on a `device_type` device, or None when it can."""
        if self.gpu_only and device_type != "cuda":
            return self.gpu_reason.format(name=self.name, device=device_type)
        if numerics not in self.numerics:
            if numerics == "bf16-autocast" and self.runtime == "cpp":
                return "bf16-autocast is torch.autocast in Python; the C++ programs have no autocast"
            return f"{self.name} does not run numerics {numerics} (it runs {list(self.numerics)})"
        return None


_CUDNN_REASON = "the cudnn backend runs on a CUDA GPU only, and this run's device is {device}"

REGISTRY: dict[str, Implementation] = {i.name: i for i in (
    Implementation("eager", "eager", "python", "module", EXPERIMENTS),
    Implementation("eager-cudagraphs", "eager", "python", "module, cuda graph", EXPERIMENTS, gpu_only=True,
                   sweep_build="per-shape", baseline=True,
                   gpu_reason="CUDA graphs (torch.cuda.graphs) need a CUDA GPU, and this run's device is {device}"),
    Implementation("torchscript-python", "torchscript", "python", "torch.jit.load", EXPERIMENTS,
                   artifacts={"backends": "torchscript", "sweep": "torchscript"}),
    Implementation("torchscript-cpp", "torchscript", "cpp", "torch::jit::load", EXPERIMENTS, CPP_NUMERICS,
                   program="libtorch", native_model="torchscript",
                   artifacts={"backends": "torchscript", "sweep": "torchscript"}),
    Implementation("libtorch", "libtorch", "cpp", "torch::nn", EXPERIMENTS, CPP_NUMERICS, program="libtorch",
                   native_model="libtorch"),
    Implementation("aoti", "aoti", "cpp", "AOTIModelPackageLoader", EXPERIMENTS, CPP_NUMERICS, program="libtorch",
                   native_model="aoti", artifacts={"backends": "aoti", "sweep": "aoti-dynamic"},
                   sweep_build="dynamic"),
    Implementation("compiled", "compiled", "python", "torch.compile", ("sweep",), sweep_build="compile_shapes",
                   compile_modes=True),
    Implementation("compiled-static", "compiled", "python", "torch.compile(dynamic=False)", ("sweep",),
                   sweep_build="per-shape", compile_modes=True, baseline=True),
    Implementation("cudnn", "cudnn", "cpp", "cudnn+cublas", EXPERIMENTS, CPP_NUMERICS, program="cudnn",
                   native_model="cudnn", gpu_only=True, gpu_reason=_CUDNN_REASON),
    Implementation("cudnn-graphs", "cudnn", "cpp", "cudnn+cublas, cuda graph", EXPERIMENTS, CPP_NUMERICS,
                   program="cudnn", native_model="cudnn-graphs", gpu_only=True, gpu_reason=_CUDNN_REASON),
)}


class UnknownImplementation(KeyError):
    def __str__(self) -> str:
        return self.args[0]


def names(experiment: str | None = None) -> tuple[str, ...]:
    """The implementations (config names) of `experiment`, or of all, in report order."""
    if experiment is not None and experiment not in EXPERIMENTS:
        raise ValueError(f"no experiment {experiment!r}; one of {EXPERIMENTS}")
    return tuple(n for n, i in REGISTRY.items() if experiment is None or experiment in i.experiments)


def split(job: str) -> tuple[Implementation, str | None]:
    """A job's implementation name (a config name, or `<compile entry>-<mode>`) as (entry, compile mode)."""
    if job in REGISTRY:
        return REGISTRY[job], None
    for name in sorted(REGISTRY, key=len, reverse=True):  # compiled-static-default before compiled-*
        impl = REGISTRY[name]
        if impl.compile_modes and job.startswith(f"{name}-") and job[len(name) + 1:] in COMPILE_MODES:
            return impl, job[len(name) + 1:]
    raise UnknownImplementation(f"unknown implementation {job!r}; known: {list(REGISTRY)} "
                                f"(a compile entry as <name>-<mode>, mode one of {list(COMPILE_MODES)})")


def get(job: str) -> Implementation:
    return split(job)[0]


def jobs(implementations, compile_modes, entry_modes: dict | None = None) -> list[str]:
    """The sweep's process names: a compile entry becomes <name>-<mode> per compile mode (entry_modes[name] where
    given, else compile_modes)."""
    out = []
    for name in implementations:
        modes = (entry_modes or {}).get(name) or compile_modes
        out += [f"{name}-{m}" for m in modes] if REGISTRY[name].compile_modes else [name]
    return out


STUDY_COMPILE_MODE = "default"  # the study's torch.compile; the other modes are baselines beyond it


def in_study(job: str) -> bool:
    """Whether a job's implementation is one the study measured (its findings compare these only): not a baseline
    entry, and a compile entry in the study's mode. An unknown name is not."""
    try:
        impl, mode = split(job)
    except UnknownImplementation:
        return False
    return not impl.baseline and mode in (None, STUDY_COMPILE_MODE)


def of_program(program: str) -> tuple[str, ...]:
    """The implementations that `program` (libtorch | cudnn) runs."""
    return tuple(n for n, i in REGISTRY.items() if i.program == program)


AUTOTUNE_MODES = frozenset({"max-autotune", "max-autotune-no-cudagraphs"})  # Inductor times candidate kernels


def times_algorithms(job: str, config: dict) -> bool:
    """Whether a job's worker, under a job's config (its numerics' backend_flags applied), times candidate
    algorithms on the GPU while it loads a cell: cuDNN's benchmark mode (torch's cudnn.benchmark, the C++ programs'
    --cudnn-benchmark), the hand-written program's cudnnFind (study_a.cudnn.algo find, or cudnn-benchmark), or
    Inductor's max-autotune. Timed beside other workers' loads, its choice would be made on a shared GPU, so the
    conductor loads such a worker alone."""
    impl, mode = split(job)
    return times_candidates(config, mode) or (impl.program == "cudnn" and config["study_a"]["cudnn"]["algo"] == "find")


def times_candidates(config: dict, mode: str | None) -> bool:
    """Whether torch code of compile mode `mode` (None: not compiled) times candidates as it builds or first runs:
    under cuDNN's benchmark mode every convolution does; a max-autotune build times Inductor's kernels. Study A's
    jobs (times_algorithms) and Study B's vision workers share this rule."""
    return config["backend_flags"]["cudnn_benchmark"] or mode in AUTOTUNE_MODES


def compiles(job: str) -> bool:
    """Whether a job's worker compiles with torch.compile as it loads (a compile entry, <name>-<mode>). The sweep's
    compile warm-up builds these before the job (study_a/sweep/compile_warm_up.py); without it the first
    invocation's build is a cold compile, and that invocation prepares alone (InvocationProtocol.batch's
    first_alone)."""
    return split(job)[1] is not None


def rank(job: str) -> tuple[int, str]:
    """The report's sort key of a job's name: its entry's place in REGISTRY (unknown names last), then the name."""
    order = list(REGISTRY)
    try:
        return order.index(get(job).name), job
    except UnknownImplementation:
        return len(order), job


def order(jobs_seen) -> list[str]:
    """`jobs_seen` (names, repeats allowed) once each, in the report's order."""
    return sorted(dict.fromkeys(jobs_seen), key=rank)


@contextlib.contextmanager
def registered(implementation: Implementation) -> Iterator[Implementation]:
    """`implementation` in REGISTRY inside the block (tests: a new entry reaches every list)."""
    if implementation.name in REGISTRY:
        raise ValueError(f"{implementation.name!r} is registered already")
    REGISTRY[implementation.name] = implementation
    try:
        yield implementation
    finally:
        del REGISTRY[implementation.name]
