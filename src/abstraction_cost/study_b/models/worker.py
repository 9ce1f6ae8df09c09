"""One process of Study B's vision protocol (vision_protocol.py): it holds some variants of one case and times a
block of one of them on command. One JSON record per line on stdout, one command per line on stdin:

    python -m abstraction_cost.study_b.models.worker SPEC.json
    -> {"kind": "up", "monotonic_s"}               once the model and inputs are loaded
    prepare -> {"kind": "ready", "variants": {name: {status, message, call_ms, warmup_calls, steady, build...,
                build_s, warmup_s}}, "monotonic_s"}  (time.monotonic(): the protocol logs when each was ready)
    time NAME N -> {"kind": "block", "variant": NAME, "times_ms": [...]} | {"kind": "failed", "variant", "status",
                   "message"} (the variant is over for this process)
    profile N [NAME ...] -> {"kind": "profile", "variants": {name: {status, message, profiled_calls, host_issue_ms,
                   ..., device_ms, ...}}} (measure/profiled.py; every variant held when no name is given): sent only
                   after the last timed turn of the process, since a process stays slower once the profiler has run

Roles (spec["role"]): `clean` holds eager and the eager baselines and never compiles anything, so its eager is the
baseline the study compares with; `compiled` holds the whole model compiled in spec["mode"] (with the selective
variants where spec["choices"] has them) and, built after all of those, `eager_in_process`: the same eager model
in a process that has loaded compiled code (the drift is the ratio of the two eagers, measured in the same turns).
Variants are built and checked against eager's output before any is warmed up; each warms up until the medians
of two consecutive windows agree within STEADY_TOLERANCE (at most warmup_max calls). Python's garbage collector
is off from the end of prepare (the model's objects frozen), so no collection lands inside a timed call.
"""
from __future__ import annotations

import gc
import importlib
import json
import logging
import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from ...measure import numerics as nx
from ...measure import output_check, profiled
from ...measure.timing import StepTimer, synchronize
from ...models import cuda_graphs
from ...programs.workers import worker_records
from .. import configurations as cfgs
from . import selective
from . import vision as vm
from .oracles import parse_choice

log = logging.getLogger(__name__)

STEADY_WINDOW = 3          # warm-up calls per window
STEADY_TOLERANCE = 0.05    # two consecutive windows' medians within this: steady
CRASH_ENV = "AC_VISION_WORKER_CRASH"   # tests: "ROLE:VARIANT:INVOCATION" exits the worker in that variant's 1st block
PROFILE_CRASH_ENV = "AC_VISION_WORKER_PROFILE_CRASH"   # tests: "ROLE" exits the worker in its profiled pass


class _NoRun:
    """The job's MeasuredRun where a worker has none: phases are not sampled here."""

    @contextmanager
    def phase(self, name):
        yield


def _backend(name: str):
    """vision_models.BACKEND: a torch.compile backend's name, or MODULE:NAME of a callable one (tests)."""
    if ":" not in name:
        return name
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


class Variants:
    """The role's variants of one case, built, checked and warmed up by prepare(), timed by time()."""

    def __init__(self, spec: dict):
        self.spec = spec
        vm.BACKEND = _backend(spec["backend"])
        s = spec["setting"]
        self.case = vm.Case(**{**spec["case"], "batch_size": s["batch_size"], "numerics": s["numerics"],
                               "memory_format": s["memory_format"]})
        self.loaded = vm.load_case(self.case)
        self.fns: dict[str, callable] = {}
        self.calls = 0

    def _builders(self) -> dict:
        case, loaded = self.case, self.loaded
        model, inputs, device = loaded.model, loaded.inputs, loaded.device

        def timed(fn, configuration):
            return lambda: vm.prepare_timed(fn, configuration, case.mode, inputs[0], device)

        if self.spec["role"] == "clean":
            out = {"eager": timed(model, case.eager)}
            if "channels_last" in self.spec["baselines"]:
                out["eager_channels_last"] = timed(vm.channels_last(model), case.eager)
            if "cuda_graphs" in self.spec["baselines"] and device.type == "cuda":
                out["eager_cuda_graphs"] = lambda: timed(cuda_graphs.Graphed(model, inputs[0][0]), case.eager)()
            return out
        choices = self.spec.get("choices") or {}

        def whole():
            if choices:   # the units of the selective variants are compiled after the whole model, as in the job
                vm.ensure_compiled(case, loaded, _NoRun())
            else:
                loaded.whole = vm.prepare_whole(model, case, inputs[0], device)
            return loaded.whole

        out = {"compiled": whole}
        for variant, choice in choices.items():
            construction = selective.VARIANTS[variant][1]
            out[variant] = (lambda c=parse_choice(choice), k=construction, v=variant:
                            selective._prepare_choice(case, loaded, c, k, v))
        out["eager_in_process"] = timed(model, case.eager)   # last: after every compiled variant is loaded
        return out

    def prepare(self) -> dict:
        case, loaded = self.case, self.loaded
        reference = output_check.reference(loaded.model, loaded.inputs[0], case.numerics, loaded.device)
        answers = {}
        with torch.no_grad():
            for name, build in self._builders().items():
                prepared, started = None, time.perf_counter()
                try:
                    prepared = build()
                    if not name.startswith("eager"):
                        reference.require(prepared.fn, loaded.inputs[0], f"{case.model} {name}")
                    self.fns[name] = prepared.fn
                    answers[name] = {"status": "ok", "message": None, **prepared.compile_columns(),
                                     "build_s": time.perf_counter() - started}
                except Exception as err:   # a failed build or check is this variant's record; the rest go on
                    if loaded.device.type == "cuda":
                        torch.cuda.empty_cache()
                    answers[name] = {"status": vm.status_of(err), "message": vm.message_of(err),
                                     **(prepared.compile_columns() if prepared is not None else {})}
            gc.collect()
            gc.freeze()
            gc.disable()    # from here to the process's end: no collection inside a warm-up or timed call
            for name in list(self.fns):
                try:
                    started = time.perf_counter()
                    with vm.refuse_compilation(f"{case.model} {name} warm-up"):
                        answers[name].update(self._warm_up(name), warmup_s=time.perf_counter() - started)
                except Exception as err:
                    self.fns.pop(name)
                    answers[name] = {"status": vm.status_of(err), "message": vm.message_of(err)}
        return {"kind": "ready", "variants": answers, "monotonic_s": time.monotonic()}

    def _warm_up(self, name: str) -> dict:
        """Windows of calls until two consecutive medians agree within STEADY_TOLERANCE, after at least the
        config's warmup calls and one per input set, at most warmup_max calls."""
        least = max(self.spec["warmup"], len(self.loaded.inputs))
        calls, previous = 0, None
        while True:
            m = statistics.median(self._timed(name, STEADY_WINDOW))
            calls += STEADY_WINDOW
            steady = previous is not None and abs(m / previous - 1) <= STEADY_TOLERANCE
            if calls >= least and (steady or calls >= self.spec["warmup_max"]):
                return {"call_ms": m, "warmup_calls": calls, "steady": steady}
            previous = m

    def _timed(self, name: str, calls: int) -> list[float]:
        """`calls` calls rotating through the inputs, each synchronised before it starts and timed alone (CUDA
        events on the GPU)."""
        fn, inputs, device = self.fns[name], self.loaded.inputs, self.loaded.device
        timer = StepTimer(device)
        with torch.no_grad():
            for _ in range(calls):
                x = inputs[self.calls % len(inputs)]
                self.calls += 1
                synchronize(device)
                with timer.step():
                    fn(*x)
        return timer.elapsed_ms()

    def time(self, name: str, calls: int) -> dict:
        if os.environ.get(CRASH_ENV) == f"{self.spec['role']}:{name}:{self.spec['invocation']}":
            os._exit(3)
        try:
            with vm.refuse_compilation(f"{self.case.model} {name}"), torch.no_grad():
                # one untimed call first: the variant's first call after another's runs on what that one left
                self.fns[name](*self.loaded.inputs[self.calls % len(self.loaded.inputs)])
                return {"kind": "block", "variant": name, "times_ms": self._timed(name, calls)}
        except Exception as err:
            self.fns.pop(name, None)
            return {"kind": "failed", "variant": name, "status": vm.status_of(err), "message": vm.message_of(err)}

    def _call(self, name: str):
        """One call of the variant on the next input, unsynchronised (the profiled pass synchronises)."""
        fn, inputs = self.fns[name], self.loaded.inputs

        def call():
            x = inputs[self.calls % len(inputs)]
            self.calls += 1
            fn(*x)
        return call

    def profile(self, names: list[str], calls: int) -> dict:
        """The profiled pass (measure/profiled.py) of `calls` calls of each variant of `names` (all held where
        empty), after the invocation's timed turns, never timed: every variant's host loop (one untimed call
        first, as a turn has), then every variant's device loop under torch.profiler, so that no host loop follows
        a profiler session. A variant's failure is its own record's status; its timed blocks stand."""
        if os.environ.get(PROFILE_CRASH_ENV) == self.spec["role"]:
            os._exit(3)
        device, out, host = self.loaded.device, {}, {}
        names = names or list(self.fns)
        for name in names:
            if name not in self.fns:
                out[name] = {"status": "not_run", "message": f"{name} is not held (its build or a turn failed)"}
        held = [n for n in names if n in self.fns]
        for stage in ("host", "device"):
            for name in held:
                if name in out:
                    continue
                try:
                    with vm.refuse_compilation(f"{self.case.model} {name} profiled pass"), torch.no_grad():
                        call = self._call(name)
                        if stage == "host":
                            call()
                            host[name] = profiled.host_loop(call, device, calls)
                        else:
                            out[name] = {"status": "ok", "message": None,
                                         **profiled.device_loop(call, device, host[name])}
                except Exception as err:  # noqa: BLE001 - an oom or error while profiling is this record's status
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
                    out[name] = {"status": vm.status_of(err), "message": vm.message_of(err)}
        return {"kind": "profile", "variants": out}


def serve(variants_of, commands, answer) -> None:
    variants = variants_of()
    answer({"kind": "up", "monotonic_s": time.monotonic()})   # the protocol's log: when each worker was up
    for line in commands:
        op, _, arg = line.strip().partition(" ")
        if op == "prepare":
            answer(variants.prepare())
        elif op == "time":
            name, _, n = arg.rpartition(" ")
            answer(variants.time(name, int(n)))
        elif op == "profile":
            n, *names = arg.split()
            answer(variants.profile(names, int(n)))
        else:
            raise ValueError(f"vision_worker: {line.strip()!r} is not 'prepare', 'time NAME N' or "
                             "'profile N [NAME ...]'")


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    records = worker_records(f"vision {spec['role']} worker")
    torch.manual_seed(spec["case"]["seed"])
    device = cfgs.device_for(cfgs.configuration(cfgs.PAIRS[spec["case"]["pair"]][1]))
    numerics = spec["setting"]["numerics"]
    with nx.applied(numerics), nx.autocast(numerics, device):
        serve(lambda: Variants(spec), sys.stdin, lambda record: records.write(json.dumps(record) + "\n"))


if __name__ == "__main__":
    main(sys.argv[1])
