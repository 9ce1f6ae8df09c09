"""One job of Study A's backend comparison in evaluation: one implementation of ResNet-50, one batch, timed in
every numerics of study_a.backends.numerics in turn.

Every implementation loads the same init-weights file and evaluates the same uint8 batch (the first batch_size
images of the test split of results/study_a/backends/input, a prepared directory), normalised on the device,
in eval mode without gradients. Timing is measure/timing.benchmark()'s, in Python and in C++ alike: `warmup`
untimed calls, then `repeats` calls, each synchronised before it starts and timed from the host-to-device copy
to the logits. The job writes one backend_eval row per timed call (one row with the status when it could not
run) and the last call's logits (float32, batch × classes; an empty file when there are none) for parity.

One process per implementation (run_job) pays the interpreter's start, torch's import and the CUDA context once
for all numerics. Each numerics is measured as a job of its own was: its own measured run and environment row,
its TF32 flags set (measured_run) before its model is built, its own model; a C++ program is launched once per
numerics, since it reads the TF32 setting from its command line at start. A numerics that fails (an exception,
out of memory, its C++ program crashing) is its row with that status and the next one runs. Each finished
numerics' outputs are kept (eval_store.py) until the job ends: a killed job's rerun measures only the rest. An
interpreter that dies outright (a fault in native code of torch itself) takes the job down; Snakemake says so,
and the rerun keeps the numerics finished before it.

    implementation       backend      runtime  the model
    eager                eager        python   models.resnet.resnet50 (nn.Module)
    eager-cudagraphs     eager        python   the same, captured as a CUDA graph (cuda_graphs.py), its output
                                               checked against eager's before timing; CUDA GPU only
    torchscript-python   torchscript  python   torch.jit.load of the scripted module
    torchscript-cpp      torchscript  cpp      ac_libtorch eval --model torchscript (torch::jit::load)
    libtorch             libtorch     cpp      ac_libtorch eval --model libtorch (torch::nn, native/libtorch)
    aoti                 aoti         cpp      ac_libtorch eval --model aoti (AOTIModelPackageLoader)
    cudnn                cudnn        cpp      ac_cudnn eval --model cudnn (cuDNN + cuBLAS by hand, native/cudnn)
    cudnn-graphs         cudnn        cpp      ac_cudnn eval --model cudnn-graphs (the same, replayed as a CUDA graph)
"""
from __future__ import annotations

import gc
import logging
import os
import time
import traceback
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from ... import faults, implementations, tables
from ...data import prepared
from ...data.specs import spec
from ...measure import device as devices
from ...measure import numerics as nx
from ...measure.output_check import WrongOutput, reference
from ...measure.run import Run, measured_run
from ...measure.timing import benchmark
from ...models import resnet
from ...programs import native
from ...models import cuda_graphs
from .. import aoti, cudnn, torchscript
from ..eager import Normaliser
from . import store as eval_store

log = logging.getLogger(__name__)


# The backend comparison's implementations (implementations.py): name -> entry (backend, runtime, program, ...)
IMPLEMENTATIONS = {name: implementations.REGISTRY[name] for name in implementations.names("backends")}
# implementation -> `ac_libtorch eval --model` for those that run in C++
NATIVE_MODELS = {name: impl.native_model for name, impl in IMPLEMENTATIONS.items() if impl.program == "libtorch"}


@dataclass(frozen=True)
class EvalSettings:
    """study_a.backends, with the measurement settings every timed callable shares (measure.*)."""
    dataset: str
    init: str
    seed: int
    batch_size: int
    resolution: int
    warmup: int
    repeats: int
    require_gpu: bool
    logit_tolerance: float

    @classmethod
    def from_config(cls, config: dict) -> "EvalSettings":
        b = config["study_a"]["backends"]
        return cls(dataset=b["dataset"], init=b["init"], seed=config["seed"], batch_size=b["batch_size"],
                   resolution=b["resolution"], warmup=config["measure"]["warmup"],
                   repeats=config["measure"]["repeats"], require_gpu=b["require_gpu"],
                   logit_tolerance=b["logit_tolerance"])


@dataclass
class Timed:
    """What one implementation's eval produced."""
    times_ms: list[float]
    logits: np.ndarray
    load_s: float
    measures: dict


def input_batch(prepared_dir: str | os.PathLike, batch_size: int) -> tuple[np.ndarray, prepared.Prepared]:
    data = prepared.load(prepared_dir)
    if len(data.test.labels) < batch_size:
        raise ValueError(f"{prepared_dir}: {len(data.test.labels)} test images, batch_size {batch_size} needs more")
    return np.array(data.test.images[:batch_size], copy=True), data  # a writable copy in memory, not the map


def time_python(forward, images: np.ndarray, mean, std, run: Run, warmup: int, repeats: int) -> tuple[list, np.ndarray]:
    """benchmark() of H2D copy + normalisation + forward, inside the run's `eval` phase; the last logits."""
    normalise = Normaliser(mean, std, run.device)
    out = {}

    def call():
        out["logits"] = forward(normalise(images))

    with torch.no_grad(), run.phase("eval"):
        times = benchmark(call, device=run.device, warmup=warmup, repeats=repeats)
    return times, out["logits"].float().cpu().numpy()


def eval_python(implementation: str, inputs, settings: EvalSettings, classes: int, run: Run,
                numerics: str = "fp32") -> Timed:
    images, data = input_batch(inputs.input, settings.batch_size)
    started = time.perf_counter()
    if implementation in ("eager", "eager-cudagraphs"):
        model = resnet.load_eval(inputs.weights, data.manifest["channels"], classes, run.device)
    else:
        model = torchscript.load(inputs.module, run.device)
    forward = nx.under(numerics, model, run.device)
    if implementation == "eager-cudagraphs":
        forward = _graphed(model, images, data, numerics, run.device)
    load_s = time.perf_counter() - started  # with eager-cudagraphs' capture and output check
    times, logits = time_python(forward, images, data.mean, data.std, run, settings.warmup, settings.repeats)
    return Timed(times, logits, load_s, run.measures("eval"))


def _graphed(model, images: np.ndarray, data, numerics: str, device: torch.device) -> cuda_graphs.Graphed:
    """eager's forward captured as a CUDA graph for the batch's shape, its output on the batch checked against
    eager's before any timed call (WrongOutput when it differs)."""
    with torch.no_grad():
        x = Normaliser(data.mean, data.std, device)(images)
        graphed = cuda_graphs.Graphed(model, x, numerics)
        reference(model, (x,), numerics, device).require(graphed, (x,), "eager-cudagraphs")
    return graphed


def eval_native(implementation: str, inputs, settings: EvalSettings, classes: int, config: dict, run: Run,
                logits_path: Path) -> Timed:
    manifest = prepared.verify(inputs.input)  # the programs check sizes only; checksums here
    if implementation in cudnn.IMPLEMENTATIONS:
        command = cudnn.eval_command(inputs.program, implementation, inputs.input, manifest, settings.batch_size,
                                     settings.warmup, settings.repeats, config, run.device, weights=inputs.weights,
                                     classes=classes, logits_out=logits_path)
        return _timed_native(command, settings, run, logits_path)
    model = NATIVE_MODELS[implementation]
    if model == "libtorch":
        what = {"weights": inputs.weights, "classes": classes}
    elif model == "torchscript":
        what = {"module": inputs.module}
    else:
        what = {"module": Path(inputs.package) / aoti.PACKAGE}
    command = native.eval_command(inputs.program, model, inputs.input, manifest, settings.batch_size,
                                  settings.warmup, settings.repeats, config, run.device, logits_out=logits_path,
                                  **what)
    return _timed_native(command, settings, run, logits_path)


def _timed_native(command: list[str], settings: EvalSettings, run: Run, logits_path: Path) -> Timed:
    """Launch a C++ eval and read its record; ac_cudnn's algorithm choice and workspace come along."""
    result = native.launch(command, logger=log)
    failure = result.failure()
    records = result.of_kind("eval")
    if failure is not None or not records:
        status, message = failure or ("error", "the program wrote no eval record")
        raise NativeFailure(status, message)
    record = records[-1]
    native.mark_phase(run, "eval", record)
    logits = np.fromfile(logits_path, dtype="<f4").reshape(settings.batch_size, -1)
    algorithms = {k: record[k] for k in ("conv_algo", "workspace_mib") if k in record}
    return Timed(list(record["times_ms"]), logits, float(record["load_s"]),
                 {**native.phase_measures(run, "eval", record), **algorithms})


class NativeFailure(RuntimeError):
    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


def _artifact(implementation: str, inputs) -> dict:
    """The artifact's metadata (how it was made, how long that took), or {} for implementations without one."""
    if implementation.startswith("torchscript"):
        return torchscript.read_meta(inputs.meta)
    if implementation == "aoti":
        return aoti.read_meta(inputs.package)
    return {}


def _method(implementation: str, artifact: dict) -> str:
    return artifact.get("method") or IMPLEMENTATIONS[implementation].method


def job_config(config: dict, numerics: str) -> dict:
    """The config with the TF32 setting of `numerics` (measure/numerics.py), which measured_run applies and
    records in the environment row and native.common_flags passes to the C++ program."""
    return nx.job_config(config, numerics, "study_a.backends.numerics")


def run_serial(snakemake) -> None:
    """The study's protocol: each implementation in turn in this job, its warm-up and timed calls back to back
    (measure/timing.benchmark), a C++ program launched for it. Each implementation has its own measured run; the
    job's environment output holds their rows. Each finished implementation's outputs are kept (eval_store.py)
    until the job ends: a killed job's rerun measures only the rest."""
    numerics, out = snakemake.wildcards.numerics, snakemake.output
    implementations = list(snakemake.params.implementations)
    config = job_config(snakemake.config, numerics)
    store = eval_store.NumericsStore(eval_store.kept_dir(out.env, numerics),
                                     eval_store.job_key(config, numerics, snakemake.input))
    envs = []
    for implementation, table, logits in zip(implementations, out.tables, out.logits, strict=True):
        env = store.directory / f".{implementation}.env.parquet"
        paths = (table, env, logits)
        envs.append(env)
        if store.restore(implementation, paths):
            log.info("%s/%s: kept from an earlier attempt, not measured again", numerics, implementation)
            continue
        started = time.perf_counter()
        job = SimpleNamespace(config=snakemake.config, rule=snakemake.rule,
                              input=inputs_of(implementation, snakemake.input))
        run(job, implementation, numerics, SimpleNamespace(table=table, env=env, logits=logits))
        store.keep(implementation, paths)
        _release()
        log.info("%s/%s: %.1f s", numerics, implementation, time.perf_counter() - started)
    tables.concat("environment", envs, out.env)
    store.clear()


def inputs_of(implementation: str, inputs) -> SimpleNamespace:
    """The numerics job's inputs as one implementation's: its C++ program (program_libtorch or program_cudnn, as
    the rule names them) as `program`."""
    named = dict(inputs.items()) if hasattr(inputs, "items") else dict(vars(inputs))
    key = "program_cudnn" if implementation in cudnn.IMPLEMENTATIONS else "program_libtorch"
    if IMPLEMENTATIONS[implementation].runtime == "cpp" and key in named:
        named["program"] = named[key]
    return SimpleNamespace(**named)


def run(snakemake, implementation: str, numerics: str = "fp32", out=None) -> None:
    """Measure one implementation in one numerics and write its rows, environment row and logits to `out`
    (table, env, logits; the job's output by default)."""
    config, inputs = job_config(snakemake.config, numerics), snakemake.input
    out = out if out is not None else snakemake.output
    settings = EvalSettings.from_config(config)
    ds = spec(settings.dataset, config)
    impl = IMPLEMENTATIONS[implementation]
    device = devices.select(config)
    artifact = _artifact(implementation, inputs)
    base = {"implementation": implementation, "backend": impl.backend, "runtime": impl.runtime, "protocol": "serial",
            "method": _method(implementation, artifact), "device": device.type, "batch_size": settings.batch_size,
            "numerics": numerics,
            "resolution": settings.resolution, "dataset": settings.dataset, "init": settings.init,
            "seed": settings.seed, "channels": ds.channels, "prepare_s": artifact.get("prepare_s")}
    logits_path = Path(out.logits)
    logits_path.unlink(missing_ok=True)
    with measured_run(config, rule=snakemake.rule, job={"implementation": implementation, "numerics": numerics},
                      env_path=out.env, device=device) as measured:
        rows = _measure(implementation, inputs, settings, ds.classes, config, measured, artifact, logits_path,
                        numerics)
        defaults = dict.fromkeys(tables.schema("backend_eval"))
        table = [{**defaults, **base, "run_id": measured.run_id, **row} for row in rows]
    tables.write("backend_eval", table, out.table)
    ok = [r["time_ms"] for r in table if r["status"] == "ok"]
    if ok:
        log.info("%s on %s: %d timed calls, median %.3f ms per batch of %d", implementation, device, len(ok),
                 float(np.median(ok)), settings.batch_size)
    if not logits_path.exists():
        logits_path.write_bytes(b"")  # no logits: the comparison reads an empty file as "no parity error"


def not_run_reason(implementation: str, settings: EvalSettings, device, artifact: dict,
                   numerics: str) -> tuple[str, str] | None:
    """(status, message) for an implementation this job cannot measure here, else None."""
    if settings.require_gpu and device.type != "cuda":
        return "not_run", "no CUDA GPU on this machine and study_a.backends.require_gpu is true"
    impl = IMPLEMENTATIONS[implementation]
    reason = impl.not_run_reason(numerics, device.type)  # implementations.py: a GPU it needs, numerics it lacks
    if reason is not None and impl.gpu_only:
        return "not_run", reason
    if artifact.get("status", "ok") != "ok":
        return artifact["status"], artifact.get("message") or "the artifact could not be made"
    return None if reason is None else ("not_run", reason)


def _measure(implementation, inputs, settings, classes, config, run, artifact, logits_path,
             numerics="fp32") -> list[dict]:
    def failed(status: str, message: str) -> list[dict]:
        log.warning("%s %s: %s", implementation, status, message)
        return [{"status": status, "message": message}]

    reason = not_run_reason(implementation, settings, run.device, artifact, numerics)
    if reason is not None:
        return failed(*reason)
    fault = faults.eval_numerics(numerics)
    try:
        if fault == "oom":
            raise torch.OutOfMemoryError(f"CUDA out of memory (injected by {faults.VARIABLE} in numerics {numerics})")
        if IMPLEMENTATIONS[implementation].runtime == "python":
            timed = eval_python(implementation, inputs, settings, classes, run, numerics)
            _write_logits(logits_path, timed.logits)
        else:
            with faults.injected("phase", "phase:segv@backend_eval-0") if fault == "segv" else nullcontext():
                timed = eval_native(implementation, inputs, settings, classes, config, run, logits_path)
    except NativeFailure as err:
        return failed(err.status, str(err))
    except WrongOutput as err:
        return failed("wrong_output", str(err))
    except prepared.MissingDataset as err:
        return failed("missing", str(err))
    except torch.OutOfMemoryError as err:
        return failed("oom", str(err).splitlines()[0])
    except Exception as err:
        log.error("%s failed:\n%s", implementation, traceback.format_exc())
        return failed("error", f"{type(err).__name__}: {err}")
    return [{"repeat": i, "status": "ok", "message": None, "time_ms": ms,
             "time_per_sample_ms": ms / settings.batch_size, "load_s": timed.load_s, **timed.measures}
            for i, ms in enumerate(timed.times_ms)]


def _release() -> None:
    """The numerics' model and tensors freed and the allocator's cache returned, so that the next numerics' device
    memory (NVML's, the allocator's peak) starts from what a process of its own would see."""
    gc.collect()
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()



def _write_logits(path: Path, logits: np.ndarray) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    np.ascontiguousarray(logits, dtype="<f4").tofile(tmp)
    os.replace(tmp, path)
