"""Study A's inference sweep in its serial protocol, the job: one process per implementation walks every cell of
resolution × batch × input transfer mode (cells.py: order, oom skipping, fault hook) in each numerics in turn
(python_walk.py; a C++ program's: native_walk.py), and writes one row per cell.

Each numerics (study_a.sweep.numerics, measure/numerics.py) has its own measured run, set before its model is
built, as in the backend comparison's eval job: the TF32 flags by measured_run (recorded in its environment row)
and passed to the C++ programs as --tf32; bf16-autocast wraps the Python forward (and a compiled build's first call)
in torch.autocast, and the C++ programs, which have no autocast, are not_run.

Each implementation's runtime, model, C++ program and build column are its entry in implementations.py; a Python
build per shape (a compile, a CUDA graph), timed as build_s and checked against eager: python_model.PythonModel.

Each cell's row is kept on disk as it completes (store.CellStore): a job killed after hours resumes at the
first cell without a row, in Python as in C++ (--start-cell, --oom-at from the kept ooms), under the same run_id.
"""
from __future__ import annotations

import contextlib
import logging
import tempfile
import time
import traceback
from pathlib import Path

from ... import implementations, tables
from ...data.specs import spec
from ...measure import device as devices
from ...measure import numerics as nx
from ...measure.run import Run, measured_run
from .. import aoti_dynamic
from ..transfer import Pool
from .cells import SweepSettings, _first_line, _not_run_rows, build_kind, kind
from .check import check_logits
from .native_walk import native_cells, sweep_command
from .python_model import PythonModel
from .python_walk import python_cells
from .store import CellStore, cells_dir, job_key

log = logging.getLogger(__name__)


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
