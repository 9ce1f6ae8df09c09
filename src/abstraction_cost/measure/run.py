"""One measuring job: its run_id, device, NVML sampler, phases, and its row of the environment table.

    with measured_run(config, rule="train", job=wildcards, env_path=out.env) as run:
        with run.phase("train-0"):
            ...
        row = {"run_id": run.run_id, **run.measures("train-0"), ...}

Every row the job writes carries run.run_id, which joins results/environment.parquet.
"""
from __future__ import annotations

import datetime as dt
import logging
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Mapping

import torch

from .. import faults, tables
from . import affinity, gpu_slots, host_speed, worker_phases
from . import device as devices
from .environment import capture
from .nvml import NvmlReader, NvmlSampler
from .timing import synchronize

log = logging.getLogger(__name__)


@dataclass
class Run:
    run_id: str
    device: torch.device
    sampler: NvmlSampler
    _alloc_peaks: dict[str, float | None] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str):
        """Mark a phase for the sampler and measure the allocator's peak within it."""
        faults.phase(name)
        devices.reset_alloc_peak(self.device)
        with self.sampler.phase(name):
            yield
            synchronize(self.device)
        self._alloc_peaks[name] = devices.alloc_peak_mib(self.device)

    def measures(self, name: str) -> dict:
        """The phase's PHASE_MEASURES columns (tables.common)."""
        return {"alloc_peak_mib": self._alloc_peaks.get(name), **self.sampler.summary(name)}

    def has_phase(self, name: str) -> bool:
        return name in self.sampler.phases


@dataclass
class PrefixedRun:
    """A Run whose phases are named `prefix + name`: one job measuring several settings, whose phase names
    must stay unique within the run."""
    run: Run
    prefix: str

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def device(self) -> torch.device:
        return self.run.device

    def phase(self, name: str):
        return self.run.phase(self.prefix + name)

    def measures(self, name: str) -> dict:
        return self.run.measures(self.prefix + name)

    def has_phase(self, name: str) -> bool:
        return self.run.has_phase(self.prefix + name)


def _state_columns(reader: NvmlReader | None, suffix: str) -> dict:
    keys = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "throttle_reasons")
    try:
        state = reader.state() if reader is not None else {}
    except Exception:
        state = {}
    return {f"{k}_{suffix}": state.get(k) for k in keys}


@contextmanager
def measured_run(config: dict, rule: str, job: Mapping[str, object], env_path: str,
                 device: torch.device | None = None, run_id: str | None = None, resumes: int = 0) -> Iterator[Run]:
    """Select the device, apply the numerics settings, sample NVML, and write the environment row at the end.
    run_id and resumes: a job resumed after an interruption (measure/steps.py) goes on under its first run_id."""
    device = device if device is not None else devices.select(config)
    devices.apply_numerics(config)
    if device.type == "cuda":
        # safety net for a job that took no slot (gpu_slots.take): no two timing jobs on one GPU all the same
        gpu_slots.hold_device(devices.cuda_uuid(device))
    env = {**capture(config, device), **affinity.environment_columns("start"),
           **host_speed.environment_columns("start"), **worker_phases.environment_columns("start")}
    gpu = devices.cuda_uuid(device)
    reader, status = NvmlReader.open(gpu)
    if reader is None and gpu is not None:
        log.warning("%s: the run goes on without NVML samples (their columns stay empty); check `nvidia-smi` and "
                    "that nvidia-ml-py is installed", status)
    before = _state_columns(reader, "before")
    sampler = NvmlSampler(reader, config["measure"]["nvml_interval_ms"], status)
    run = Run(run_id=run_id or uuid.uuid4().hex[:16], device=device, sampler=sampler)
    try:
        with sampler:
            yield run
    finally:
        row = {"run_id": run.run_id, "rule": rule, "job": ",".join(f"{k}={v}" for k, v in job.items()),
               **env, **gpu_slots.environment_columns(),
               "ended_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
               "nvml_status": sampler.status, **before, **_state_columns(reader, "after"), "resumes": resumes,
               **affinity.environment_columns("end"), **host_speed.environment_columns("end"),
               **worker_phases.environment_columns("end")}
        tables.write("environment", [row], env_path)
