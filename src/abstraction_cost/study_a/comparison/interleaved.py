"""Study A's backend comparison under the interleaved protocol (study_a.backends.protocol.mode: interleaved, the
default; docs/measurement.md): one job per numerics measures every implementation, each a long-lived worker of the
sweep's (sweep_worker, `ac_libtorch sweep --serve`, `ac_cudnn sweep --serve`), taking turns on a one-cell walk.

The comparison is the sweep's conductor (sweep_conductor.conduct) on one cell: batch_size × resolution of the
comparison's own batch, copied as uint8 from page-locked memory and normalised on the device (the sweep's
uint8-pinned). That batch (results/study_a/backends/input, a prepared directory) is written once per job in the
sweep's input format (transfer.write_inputs: the first batch_size test images, at their own resolution), so the
workers need no input of their own: the comparison times exactly the calls the sweep times, in the same turns,
steady-state warm-up, invocations and adaptive invocations up to max_invocations. Each worker saves its logits
after its timed calls (--logits-dir; sweep_worker's logits_dir), which compare_backends checks against eager's.

Rows: one backend_eval row per timed call with its invocation and turn (compare_backends takes the median of the
invocations' medians with the two-level interval, and resamples turns as pairs against eager's), or one row with
the status where an implementation was not measured; an invocation that failed beside ok ones is its own row.
Every (invocation, implementation) record is kept as it arrives (sweep_store.CellStore beside the job's
environment row): a killed job resumes at the first one missing, under the same run_id.

The profiled pass (study_a.backends.protocol.profile_calls, 0: none): after each implementation's timed turns in
the first invocation the conductor has it profile that many calls of the same cell (measure/profiled.py); its
record becomes the implementation's backend_profile row (sweep_interleaved.profile_rows; sweep_profile's columns
but the cell),
or a not_run row with the reason, so the timed calls stay unprofiled.

Faults (AC_FAULT, faults.py): its cell items act in every worker, as in the sweep (cell:kill@0 kills the job once
its first record is kept); eval:segv@<numerics> makes the C++ workers of that numerics crash (SIGSEGV) as the cell
starts, eval:oom@<numerics> the Python workers run out of memory there, both outside the timed calls.
"""
from __future__ import annotations

import logging
import math
import os
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ... import faults, implementations as registry, tables
from ...data import prepared
from ...data.specs import spec
from ...measure import device as devices
from ...measure.run import Run, measured_run
from ...programs import native
from .. import cudnn
from ..inputs_manifest import read_manifest
from ..sweep.cells import Cell, Protocol, SweepSettings
from ..sweep.conductor import Store, conduct, python_worker_command
from ..sweep.interleaved import profile_rows
from ..sweep.native_walk import sweep_command
from ..sweep.store import CellStore, cells_dir
from ..transfer import write_inputs
from . import store as eval_store
from .serial import IMPLEMENTATIONS, EvalSettings, _artifact, _method, job_config, not_run_reason

log = logging.getLogger(__name__)

TRANSFER = "uint8-pinned"   # the comparison's input: its uint8 batch, pinned, normalised on the device


def protocol_of(config: dict) -> Protocol:
    """study_a.backends.protocol over the sweep's defaults; its one cell always has every worker beside the others."""
    return replace(Protocol.from_config(config["study_a"]["backends"]), interleave_max_pixels=math.inf)


def sweep_settings(settings: EvalSettings, implementations: list[str], numerics: str) -> SweepSettings:
    """The one-cell walk as the sweep's programs take it (warm-up and timed-call counts from measure.*)."""
    return SweepSettings(batches=(settings.batch_size,), resolutions=(settings.resolution,), warmup=settings.warmup,
                         repeats=settings.repeats, transfers=(TRANSFER,), implementations=tuple(implementations),
                         compile_modes=(), pool=settings.batch_size, kernel_batch=settings.batch_size,
                         kernel_resolution=settings.resolution, kernel_top=0, require_gpu=settings.require_gpu,
                         numerics=(numerics,))


def injected(implementation: str, numerics: str) -> list[str]:
    """A worker's command prefix for its numerics' eval fault (the module's docstring): `env AC_FAULT=...` with the
    fault as its cell item, or nothing."""
    fault, cpp = faults.eval_numerics(numerics), IMPLEMENTATIONS[implementation].runtime == "cpp"
    if (fault == "segv" and cpp) or (fault == "oom" and not cpp):
        cell = f"cell:{'crash' if fault == 'segv' else 'oom'}@0"
        return ["env", f"{faults.VARIABLE}={faults.replaced('cell', cell)}"]
    return []


def call_rows(record: dict, batch: int) -> list[dict]:
    """backend_eval rows of one (invocation, implementation) record: one per timed call, or one with its status."""
    common = {"invocation": record.get("invocation"), "warmup_calls": record.get("warmup_calls"),
              "steady": record.get("steady"), "exit_status": record.get("exit_status")}
    if record["status"] != "ok" or not record.get("blocks"):
        return [{**common, "status": record["status"], "message": record.get("message") or "no timed calls"}]
    rows = []
    for turn, times in zip(record.get("turns") or [], record["blocks"]):
        for ms in times:
            rows.append({**common, "repeat": len(rows), "turn": turn, "status": "ok", "message": None,
                         "time_ms": ms, "time_per_sample_ms": ms / batch})
    h2d = record.get("h2d_ms") or []
    for row, ms in zip(rows, h2d):
        row["h2d_ms"] = ms
    return rows


def measure(implementations: list[str], inputs, settings: EvalSettings, protocol: Protocol, config: dict,
            classes: int, run: Run, numerics: str, store: CellStore, scratch: Path,
            profiles: dict[str, list[dict]] | None = None) -> dict[str, list[dict]]:
    """Rows by implementation; each measured implementation's logits in scratch/logits/<implementation>/, its
    backend_profile row in `profiles`."""
    rows, active, artifacts = {}, [], {}
    profiles = {} if profiles is None else profiles
    for impl in implementations:
        artifacts[impl] = _artifact(impl, inputs)
        reason = not_run_reason(impl, settings, run.device, artifacts[impl], numerics)
        if reason is None:
            active.append(impl)
        else:
            log.warning("%s %s: %s", impl, *reason)
            rows[impl] = [{"status": reason[0], "message": reason[1]}]
            profiles[impl] = [{"status": "not_run", "message": f"not measured ({reason[0]}): {reason[1]}"}]
    if not active:
        return rows
    data = prepared.load(inputs.input)   # verified: the programs check sizes only
    if len(data.test.labels) < settings.batch_size:
        raise ValueError(f"{inputs.input}: {len(data.test.labels)} test images, batch_size {settings.batch_size} "
                         "needs more")
    pool_dir = scratch / "input"
    if not pool_dir.is_dir():
        write_inputs(inputs.input, settings.batch_size, [settings.resolution], pool_dir)
    manifest = read_manifest(pool_dir)
    named = {k: str(v) for k, v in (inputs.items() if hasattr(inputs, "items") else vars(inputs).items())}
    named["inputs"] = str(pool_dir)
    walk = sweep_settings(settings, active, numerics)
    cell = Cell(0, settings.batch_size, settings.resolution, TRANSFER)
    logits_root = scratch / "logits"
    python = {}
    for impl in active:
        (logits_root / impl).mkdir(parents=True, exist_ok=True)
        if IMPLEMENTATIONS[impl].runtime == "python":
            python[impl] = python_worker_command(
                {"implementation": impl, "inputs": named, "classes": classes, "device": str(run.device),
                 "numerics": numerics, "compile_shapes": "per-shape", "cells": [[0, cell.batch, cell.resolution,
                                                                                 TRANSFER]],
                 "warmup": settings.warmup, "warmup_max": protocol.warmup_max, "config": config,
                 "logits_dir": str(logits_root / impl)}, scratch)

    def command_for(impl: str, oom_at: str) -> list[str]:
        if impl in python:
            return injected(impl, numerics) + python[impl](oom_at)
        program = named["program_cudnn" if impl in cudnn.IMPLEMENTATIONS else "program_libtorch"]
        return injected(impl, numerics) + sweep_command(
            program, impl, SimpleNamespace(**named), manifest, walk, config, run.device, classes, 0, oom_at,
            logits_root / impl) + ["--serve", "1", "--warmup-max", str(protocol.warmup_max)]

    alone = frozenset(impl for impl in active if registry.times_algorithms(impl, config))
    records = conduct(active, command_for, [cell], walk, protocol, Store(store, active, 1), alone,
                      first_alone=any(registry.compiles(impl) for impl in active))
    for impl in active:
        mine = [r for r in records if r["implementation"] == impl]
        impl_rows = []
        for record in mine:
            found = call_rows(record, settings.batch_size)
            if "start_monotonic_s" in record:
                name = f"{impl}/invocation{record['invocation']}"
                native.mark_phase(run, name, record)
                measures = native.phase_measures(run, name, record)
                found = [{**measures, **r} for r in found]
            impl_rows += found
        rows[impl] = impl_rows or [{"status": "error", "message": "the conductor returned no record"}]
        profiles[impl] = profile_rows(impl, [cell], [r for r in mine if r.get("invocation", 0) == 0],
                                      "study_a.backends.protocol.profile_calls")
    return rows


def run(snakemake) -> None:
    """Rule eval_backend, one numerics: output.tables and output.logits (params.implementations' order), output.env,
    output.profile (table backend_profile)."""
    numerics = snakemake.wildcards.numerics
    implementations = list(snakemake.params.implementations)
    out, inputs = snakemake.output, snakemake.input
    config = job_config(snakemake.config, numerics)
    settings = EvalSettings.from_config(config)
    protocol = protocol_of(config)
    ds = spec(settings.dataset, config)
    device = devices.select(config)
    store = CellStore(cells_dir(out.env), eval_store.job_key(config, numerics, inputs))
    scratch = store.directory / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    with measured_run(config, rule=snakemake.rule, job={"numerics": numerics}, env_path=out.env, device=device,
                      run_id=store.run_id, resumes=store.resumes) as measured:
        profiles: dict[str, list[dict]] = {}
        try:
            rows = measure(implementations, inputs, settings, protocol, config, ds.classes, measured, numerics,
                           store, scratch, profiles)
        except prepared.MissingDataset as err:
            rows = {impl: [{"status": "missing", "message": str(err)}] for impl in implementations}
        except Exception as err:  # the job could not start its walk: every implementation says why
            log.exception("backend comparison %s failed", numerics)
            rows = {impl: [{"status": "error", "message": f"{type(err).__name__}: {err}"}] for impl in implementations}
    _write_profile(profiles, rows, implementations, settings, numerics, device.type, measured.run_id, out.profile)
    defaults = dict.fromkeys(tables.schema("backend_eval"))
    for impl, table_path, logits_path in zip(implementations, out.tables, out.logits, strict=True):
        artifact = _artifact(impl, inputs)
        base = {"implementation": impl, "backend": IMPLEMENTATIONS[impl].backend,
                "runtime": IMPLEMENTATIONS[impl].runtime, "method": _method(impl, artifact), "device": device.type,
                "batch_size": settings.batch_size, "numerics": numerics, "resolution": settings.resolution,
                "dataset": settings.dataset, "init": settings.init, "seed": settings.seed, "channels": ds.channels,
                "protocol": "interleaved", "transfer": TRANSFER, "run_id": measured.run_id}
        table = [{**defaults, **base, **row, "prepare_s": artifact.get("prepare_s")} for row in rows[impl]]
        tables.write("backend_eval", table, table_path)
        _copy_logits(scratch / "logits" / impl / "cell0.f32", Path(logits_path),
                     any(r["status"] == "ok" for r in table))
        ok = [r["time_ms"] for r in table if r["status"] == "ok"]
        if ok:
            log.info("%s/%s: %d timed calls over %d invocations, median %.3f ms per batch of %d", numerics, impl,
                     len(ok), len({r["invocation"] for r in table if r["status"] == "ok"}), float(np.median(ok)),
                     settings.batch_size)
    shutil.rmtree(scratch, ignore_errors=True)
    store.clear()


def _write_profile(profiles: dict[str, list[dict]], rows: dict[str, list[dict]], implementations: list[str],
                   settings: EvalSettings, numerics: str, device: str, run_id: str, path) -> None:
    """Table backend_profile: one row per implementation on the comparison's cell (cell 0); an implementation the
    job never reached (it failed before its walk) has its timed row's status and message."""
    cell = {"batch_size": settings.batch_size, "resolution": settings.resolution, "transfer": TRANSFER}
    columns, out = tables.schema("backend_profile"), []
    for impl in implementations:
        found = profiles.get(impl) or [{"status": rows[impl][0]["status"], "message": rows[impl][0].get("message")}]
        out += [{**dict.fromkeys(columns), **cell, **{k: v for k, v in p.items() if k in columns},
                 "implementation": impl, "numerics": numerics, "device": device, "run_id": run_id} for p in found]
    tables.write("backend_profile", out, path)


def _copy_logits(source: Path, path: Path, measured: bool) -> None:
    """The worker's logits as the job's output; an empty file (compare_backends: no logits) when none."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    if measured and source.is_file():
        shutil.copyfile(source, tmp)
    else:
        tmp.write_bytes(b"")
    tmp.replace(path)
