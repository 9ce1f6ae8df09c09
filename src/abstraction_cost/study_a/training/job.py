"""One Study A training job, whatever the backend: the rows it writes when it runs, and when it cannot.

A job is (backend, dataset, init, seed). It writes rows of the `training` table in every case:
- not_run: the config requires a GPU (study_a.training.require_gpu) and this machine has none;
- missing: the dataset could not be obtained (the prepared manifest says why), with the not_run reason too
  when both apply;
- oom / error: the backend ran out of device memory or failed; the message says how;
- ok: one row per (epoch, phase) from the backend.
"""
from __future__ import annotations

import logging
import time
import traceback
from typing import Callable

import numpy as np
import torch

from ... import tables
from ...config import TrainingSettings
from ...data import order as orders
from ...data import prepared
from ...measure import device as devices
from ...measure.run import Run, measured_run

log = logging.getLogger(__name__)

# (run, data, order, weights_path, settings) -> rows with epoch, phase, status, message and the measures
Trainer = Callable[[Run, prepared.Prepared, np.ndarray, str, TrainingSettings], list[dict]]


def _skipped(status: str, message: str) -> list[dict]:
    return [{"epoch": None, "phase": None, "status": status, "message": message}]


def run(snakemake, backend: str, trainer: Trainer) -> None:
    config, w = snakemake.config, snakemake.wildcards
    settings = TrainingSettings.from_config(config, w.dataset)
    seed = int(w.seed)
    base = {"backend": backend, "dataset": w.dataset, "init": w.init, "repeat": seed - config["seed"], "seed": seed,
            "batch_size": settings.batch_size}
    requires_gpu = config["study_a"]["training"]["require_gpu"]
    marks = [("start", time.perf_counter())]   # where a job's time beside its epochs goes, logged at its end
    device = devices.select(config)
    with measured_run(config, rule=snakemake.rule, job=dict(w.items()), env_path=snakemake.output.env,
                      device=device) as measured:
        marks.append(("device and environment", time.perf_counter()))
        if requires_gpu and device.type != "cuda":
            rows = _skipped("not_run", "no CUDA GPU on this machine and study_a.training.require_gpu is true")
            if missing := prepared.missing_reason(snakemake.input.data):
                rows = _skipped(*prepared.also_missing("not_run", rows[0]["message"], missing))
        else:
            try:
                data = prepared.load(snakemake.input.data)
                order = orders.read(snakemake.input.order, len(data.train.labels), settings.epochs)
                marks.append(("data", time.perf_counter()))
                rows = trainer(measured, data, order, snakemake.input.weights, settings)
            except prepared.MissingDataset as err:
                rows = _skipped("missing", str(err))
            except torch.OutOfMemoryError as err:
                rows = _skipped("oom", f"{str(err).splitlines()[0]}; lower study_a.training.batch_size (or "
                                       f"batch_size_overrides.{w.dataset}) to fit this device")
            except Exception as err:
                log.error("training failed:\n%s", traceback.format_exc())
                rows = _skipped("error", f"{type(err).__name__}: {err}")
            marks.append(("trainer", time.perf_counter()))   # or as far as it got
        for row in rows:
            if row["status"] != "ok":
                log.warning("%s %s: %s", backend, row["status"], row["message"])
        defaults = dict.fromkeys(tables.schema("training"))
        table = [{**defaults, **base, "device": device.type, "run_id": measured.run_id, **row} for row in rows]
    tables.write("training", table, snakemake.output.table)
    marks.append(("environment row and table", time.perf_counter()))
    epochs = sum(row.get("wall_s") or 0.0 for row in rows)
    log.info("%s job: %s; the trainer's epochs %.1f s", backend,
             ", ".join(f"{name} {t - before:.1f} s" for (_, before), (name, t) in zip(marks, marks[1:])), epochs)
