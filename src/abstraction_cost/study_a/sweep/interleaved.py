"""Rule sweep (study_a.sweep.protocol: interleaved): one job per numerics and shard (sweep_shards.py: whole
resolutions; one shard unless study_a.sweep.shards says more) measures every implementation of the sweep in turns
over the shard's cells (sweep_conductor.py), and writes the `sweep` table's rows of them all and the `sweep_blocks`
table of each turn's median, from which comparisons are resampled as pairs."""
from __future__ import annotations

import contextlib
import json
import logging
import tempfile
import time
import traceback
from pathlib import Path

from ... import implementations as registry, tables
from ...data.specs import spec
from ...measure import device as devices
from ...measure import numerics as nx
from ...measure.run import Run, measured_run
from ...programs import native
from ...tables.study_a_sweep import STUDY_TRANSFER
from .. import aoti_dynamic
from ..transfer import Pool
from . import kernels as sweep_kernels, shards as sweep_shards
from .cells import Cell, Protocol, SweepSettings, _first_line, _not_run_rows, build_kind, kind
from .check import check_logits
from .conductor import Store, block_rows, cell_row, conduct, python_worker_command
from .kernel_point import point_cell
from .native_walk import sweep_command
from .serial import _named
from .store import CellStore, cells_dir, job_key

log = logging.getLogger(__name__)


def not_run(implementation: str, settings: SweepSettings, numerics: str, device, inputs) -> tuple[str, str] | None:
    """(status, message) for an implementation this job cannot measure, else None."""
    if settings.require_gpu and device.type != "cuda":
        return "not_run", "no CUDA GPU on this machine and study_a.sweep.require_gpu is true"
    reason = registry.get(implementation).not_run_reason(numerics, device.type)
    if reason is not None:
        return "not_run", reason
    if implementation == "aoti":
        meta = aoti_dynamic.read_meta(inputs.package)
        if meta["status"] != "ok":
            return meta["status"], meta.get("message") or "no package"
    return None


PROFILE_COLUMNS = ("profiled_calls", "host_issue_ms", "host_cpu_ms", "wall_ms", "device_source", "device_ms",
                   "memcpy_ms", "kernels", "launch_calls", "device_busy_ms", "device_idle_ms", "device_message")


def profile_rows(impl: str, cells, records: list[dict],
                 key: str = "study_a.sweep.protocol.profile_calls") -> list[dict]:
    """The sweep_profile rows of one implementation: each cell's profiled pass (its first invocation's), or the
    reason it has none (`key`: the config key that turns the pass off). The backend comparison's too."""
    by_cell = {r["cell"]: r for r in sorted(records, key=lambda r: -r.get("invocation", 0))}
    out = []
    for cell in cells:
        row = {"implementation": impl, "cell": cell.index, "batch_size": cell.batch, "resolution": cell.resolution,
               "transfer": cell.transfer, **dict.fromkeys(PROFILE_COLUMNS)}
        record = by_cell.get(cell.index)
        profile = (record or {}).get("profile")
        if profile is not None:
            row.update({k: profile.get(k) for k in PROFILE_COLUMNS}, status=profile.get("status", "ok"),
                       message=profile.get("message"))
        elif record is not None and record["status"] != "ok":
            row.update(status="not_run", message=f"cell {record['status']}: nothing to profile")
        else:
            row.update(status="not_run", message=f"no profiled pass ({key}: 0)")
        out.append(row)
    return out


def python_spec(impl: str, named: dict, classes: int, device, numerics: str, settings: SweepSettings,
                protocol: Protocol, config: dict) -> dict:
    """A Python worker's spec (sweep/worker.py): its implementation, inputs, the whole grid and the numerics; the
    job's and its compile warm-up's workers (compile_warm_up.py) alike, so that they build the same graphs."""
    return {"implementation": impl, "inputs": named, "classes": classes, "device": str(device), "numerics": numerics,
            "compile_shapes": settings.compile_shapes,
            "cells": [[c.index, c.batch, c.resolution, c.transfer] for c in settings.cells()],
            "warmup": settings.warmup, "warmup_max": protocol.warmup_max, "config": config}


def interleaved_rows(implementations: list[str], inputs, settings: SweepSettings, protocol: Protocol, config: dict,
                     classes: int, run: Run, store: CellStore | None, numerics: str, logits_root: Path,
                     profiles: list[dict] | None = None, cells: list[Cell] | None = None,
                     kernel_point: Cell | None = None, kernels: list[dict] | None = None, warmed: bool = False
                     ) -> tuple[dict[str, list[dict]], list[dict]]:
    """Rows of the sweep table by implementation over `cells` (a shard; default every cell of the grid), and the
    sweep_blocks rows; the sweep_profile rows are appended to `profiles`, and the kernel table's rows of
    `kernel_point` (one of `cells`) to `kernels`. `warmed`: the job's compile warm-up ran (compile_warm_up.py), so
    no worker compiles cold as it loads the first invocation's cells and the first invocations walk together."""
    grid = settings.cells()
    cells = grid if cells is None else cells
    kernels = [] if kernels is None else kernels
    rows, active = {}, []
    for impl in implementations:
        reason = not_run(impl, settings, numerics, run.device, inputs)
        if reason is None:
            active.append(impl)
        else:
            rows[impl] = _not_run_rows(cells, *reason)
            if kernel_point is not None:
                kernels.append({"implementation": impl, "status": reason[0], "message": reason[1]})
    if not active:
        return rows, []
    pool = Pool(inputs.inputs)
    spec_dir = Path(tempfile.mkdtemp(prefix="sweep-workers-", dir=logits_root))
    named = {k: str(v) for k, v in _named(inputs).items()}
    python_specs = {impl: python_worker_command(
        python_spec(impl, named, classes, run.device, numerics, settings, protocol, config), spec_dir)
        for impl in active if kind(impl)[1] == "python"}

    def command_for(impl: str, oom_at: str) -> list[str]:
        if impl in python_specs:
            return python_specs[impl](oom_at)
        logits = logits_root / impl
        logits.mkdir(parents=True, exist_ok=True)
        program = named[f"program_{registry.get(impl).program}"]
        return sweep_command(program, impl, inputs, pool.manifest, settings, config, run.device, classes, 0,
                             oom_at, logits) + ["--serve", "1", "--warmup-max", str(protocol.warmup_max)]

    alone = frozenset(impl for impl in active if registry.times_algorithms(impl, config))
    records = conduct(active, command_for, cells, settings, protocol, Store(store, active, len(grid)), alone,
                      first_alone=not warmed and any(registry.compiles(impl) for impl in active))
    blocks = []
    for impl in active:
        mine = [r for r in records if r["implementation"] == impl]
        by_cell: dict[int, list[dict]] = {}
        for record in mine:
            by_cell.setdefault(record["cell"], []).append(record)
        impl_rows = []
        for cell in cells:
            cell_records = by_cell[cell.index]
            row = {"cell": cell.index, "batch_size": cell.batch, "resolution": cell.resolution,
                   "transfer": cell.transfer, **cell_row(cell_records, cell.batch)}
            first = next((r for r in cell_records if "start_monotonic_s" in r), None)
            if first is not None:
                name = f"{impl}/cell{cell.index}"
                native.mark_phase(run, name, first)
                row.update(native.phase_measures(run, name, first))
            build_s = next((r.get("build_s") for r in cell_records if r.get("build_s") is not None), None)
            if build_s is not None:
                row["build_s"] = build_s
            impl_rows.append(row)
        if kind(impl)[1] == "cpp":
            impl_rows = check_logits(impl_rows, logits_root / impl, impl, inputs.weights, pool, classes, numerics,
                                     run.device)
        rows[impl] = impl_rows
        blocks += [{"implementation": impl, **b} for b in block_rows(mine)]
        first = [r for r in mine if r.get("invocation", 0) == 0]
        if profiles is not None:
            profiles += profile_rows(impl, cells, first)
        if kernel_point is not None:
            source, found = sweep_kernels.from_profile(next((r for r in first if r["cell"] == kernel_point.index),
                                                            None))
            kernels += [{"implementation": impl, "source": source, **r} for r in found]
    return rows, blocks


def _warm_up(inputs) -> dict | None:
    """The job's compile warm-up's manifest (input warm_up, rule compile_cache_sweep: compile_warm_up.py); None
    where none ran."""
    path = _named(inputs).get("warm_up")
    return json.loads(Path(path).read_text()) if path else None


def _cold_builds(manifest: dict | None) -> dict[tuple[str, int], float]:
    """A warm-up manifest's cold builds by (implementation, cell); nothing without a warm-up."""
    if manifest is None:
        return {}
    return {(impl, b["cell"]): b["build_s"] for impl, records in manifest["builds"].items() for b in records
            if b["build_s"] is not None}


@contextlib.contextmanager
def _scratch(store: CellStore | None):
    """Where workers' specs and the C++ programs' logits go: beside the kept records (a resumed job checks those
    again; they go when the store is cleared), else a temporary directory."""
    if store is not None:
        yield store.directory
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def run(snakemake) -> None:
    """One numerics, every implementation: output.table (sweep), output.blocks (sweep_blocks), output.env."""
    numerics = snakemake.wildcards.numerics
    inputs = snakemake.input
    config = nx.job_config(snakemake.config, numerics, "study_a.sweep.numerics")
    settings = SweepSettings.from_config(config)
    protocol = Protocol.from_config(config["study_a"]["sweep"])
    dataset = config["study_a"]["backends"]["dataset"]
    classes = spec(dataset, config).classes
    device = devices.select(config)
    implementations = settings.jobs()
    shard = int(getattr(snakemake.wildcards, "shard", 0))
    cells = sweep_shards.of_config(config)[shard]
    # the shard's cells in the key: another split of the grid measures other cells under this shard's name
    job = {"numerics": numerics, "shard": str(shard)}
    store = CellStore(cells_dir(snakemake.output.table),
                      job_key(config, {**job, "cells": [c.index for c in cells]}, _named(inputs)))
    started = time.perf_counter()
    profiles: list[dict] = []
    kernels: list[dict] = []  # the kernel table's rows where this job has the kernel point in a numerics it profiles
    point = (point_cell(settings, cells) if hasattr(snakemake.output, "kernels")
             and numerics in settings.kernel_numerics else None)
    warm_up = _warm_up(inputs)
    with measured_run(config, rule=snakemake.rule, job=job, env_path=snakemake.output.env, device=device,
                      run_id=store.run_id, resumes=store.resumes) as measured, _scratch(store) as scratch:
        try:
            rows, blocks = interleaved_rows(implementations, inputs, settings, protocol, config, classes, measured,
                                            store, numerics, scratch, profiles, cells, point, kernels,
                                            warmed=warm_up is not None)
        except Exception as err:  # the job could not start its walk: every cell says why
            log.error("sweep %s shard %d failed:\n%s", numerics, shard, traceback.format_exc())
            rows = {impl: _not_run_rows(cells, "error", _first_line(err)) for impl in implementations}
            blocks = []
            kernels = [{"implementation": impl, "status": "error", "message": _first_line(err)}
                       for impl in implementations] if point is not None else []
    defaults = dict.fromkeys(tables.schema("sweep"))
    aoti_build = aoti_dynamic.read_meta(inputs.package).get("prepare_s") if "aoti" in implementations else None
    cold = _cold_builds(warm_up)
    table = []
    for impl in implementations:
        backend, runtime = kind(impl)
        base = {"implementation": impl, "backend": backend, "runtime": runtime, "numerics": numerics,
                "device": device.type, "dataset": dataset, "build": build_kind(impl, settings.compile_shapes),
                "attempt": 0, "protocol": "interleaved", "run_id": measured.run_id,
                "build_s": aoti_build if impl == "aoti" else None}
        table += [{**defaults, **base, **row, "cold_build_s": cold.get((impl, row["cell"]))} for row in rows[impl]]
    tables.write("sweep", table, snakemake.output.table)
    tables.write("sweep_blocks", [{**b, "numerics": numerics, "run_id": measured.run_id} for b in blocks],
                 snakemake.output.blocks)
    if hasattr(snakemake.output, "profile"):  # the interleaved rule's output
        tables.write("sweep_profile", [{**dict.fromkeys(tables.schema("sweep_profile")), **p, "numerics": numerics,
                                        "device": device.type, "run_id": measured.run_id} for p in profiles],
                     snakemake.output.profile)
    if hasattr(snakemake.output, "kernels"):
        base = {**dict.fromkeys(tables.schema("sweep_kernels")), "transfer": STUDY_TRANSFER, "numerics": numerics,
                "device": device.type, "run_id": measured.run_id}
        if point is not None:
            base.update(batch_size=point.batch, resolution=point.resolution)
        # a row without a profile (not measured, the cell failed) names where it would have come from
        tables.write("sweep_kernels", [{**base, **k_row, "source": k_row.get("source") or "sweep profiled pass"}
                                       for k_row in kernels], snakemake.output.kernels)
    store.clear()
    log.info("%s shard %d: %d of %d cells ok over %d implementations, %.1f s", numerics, shard,
             sum(r["status"] == "ok" for r in table), len(table), len(implementations),
             time.perf_counter() - started)
