"""One case of a building-block experiment, timed eager against compiled: the rows it adds to a timing table.

A case is a callable and the inputs it takes (built on the device by the experiment). For one compile mode the
pair's eager and compiled configurations are prepared (first call timed apart), then timed interleaved
(study_b/blocks/interleaved.py). A case that cannot run here is recorded, not dropped: not_run with the reason, oom,
or error with the exception (a recompile inside the timed loop included); the other cases go on. Before timing,
the compiled callable's output on the first input set is checked against eager's (measure/output_check.py): a
case whose outputs differ is `wrong_output` on both rows and is not timed.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from ...measure import affinity, numerics
from ...measure.output_check import WrongOutput, reference
from ..configurations import (COMPILE_COLUMNS, Configuration, Prepared, not_run_reason, pair_configurations,
                              prepare)
from .interleaved import interleaved

log = logging.getLogger(__name__)

# What a case builds on its device: the callable, and one or more input sets (each a tuple of arguments).
Builder = Callable[[torch.device], tuple[Callable, Sequence[tuple]]]


@dataclass(frozen=True)
class TimingSettings:
    """config study_b.blocks.timing, and the machine-wide `device` key."""
    warmup: int
    rounds: int
    repeats_per_round: int
    flush_l2: bool
    rotating_inputs: int
    rotate_max_mib: float
    min_seconds: float = 0.0
    device_setting: str = "auto"

    @classmethod
    def from_config(cls, config: dict) -> "TimingSettings":
        t = config["study_b"]["blocks"]["timing"]
        return cls(warmup=t["warmup"], rounds=t["rounds"], repeats_per_round=t["repeats_per_round"],
                   flush_l2=t["flush_l2"], rotating_inputs=t["rotating_inputs"],
                   rotate_max_mib=t["rotate_max_mib"], min_seconds=t.get("min_seconds", 0.0),
                   device_setting=config["device"])

    def input_sets(self, input_bytes: int) -> int:
        """How many distinct input sets to rotate through: one when a set is too large to copy."""
        return self.rotating_inputs if input_bytes <= self.rotate_max_mib * 2**20 else 1


def pair_device(pair: str, settings: TimingSettings) -> tuple[torch.device, str | None]:
    """The device the pair runs on here, and the reason it cannot run (None when it can)."""
    eager, compiled = pair_configurations(pair)
    reason = not_run_reason(compiled, "default", settings.device_setting)
    if compiled.device_type == "cuda" and reason is None:
        return torch.device("cuda", torch.cuda.current_device()), None
    return torch.device("cpu"), reason if compiled.device_type == "cuda" else None


def failure_status(err: BaseException) -> str:
    if isinstance(err, WrongOutput):
        return "wrong_output"
    return "oom" if isinstance(err, torch.OutOfMemoryError) else "error"


def _untimed(cfg: Configuration, pair: str, mode: str, device: torch.device, settings: TimingSettings,
             status: str, message: str, compile_columns: dict | None = None) -> dict:
    return {"pair": pair, "configuration": cfg.name, "compiled": cfg.compiled, "mode": mode,
            "device": device.type, "status": status, "message": message, "round": None, "repeat": None,
            "time_ms": None, **(compile_columns or dict.fromkeys(COMPILE_COLUMNS)),
            "warmup": settings.warmup, "flush_l2": None, "rotating_inputs": None}


def time_case(build: Builder, pair: str, mode: str, device: torch.device, settings: TimingSettings,
              keys: dict, label: str, not_run: str | None = None,
              extras: Sequence[tuple[Configuration, Callable]] = ()) -> list[dict]:
    """Rows (keys + TIMING columns) of one case in one mode, for the pair's eager and compiled configurations,
    and for each of `extras` (a configuration and the callable that computes the case its way, e.g. NumPy's
    matmul), timed in the same rounds and checked against eager's output as the compiled one is.

    not_run: a reason decided by the caller (a config key) to record the case as not run without building it.
    """
    eager_cfg, compiled_cfg = pair_configurations(pair)
    configs = (eager_cfg, compiled_cfg, *(cfg for cfg, _ in extras))
    reason = not_run or not_run_reason(compiled_cfg, mode, settings.device_setting)
    if reason is not None:
        return [{**keys, **_untimed(c, pair, mode, device, settings, "not_run", reason)} for c in configs]
    prepared: list[Prepared] = []
    try:
        with torch.no_grad():
            fn, inputs = build(device)
            flush = settings.flush_l2 and device.type == "cuda"
            for cfg in (eager_cfg, compiled_cfg):
                prepared.append(prepare(fn, cfg, mode, inputs[0], device))
            for cfg, other in extras:
                prepared.append(prepare(other, cfg, mode, inputs[0], device))
            # correct before fast: each other callable computes eager's output on the same input, or is not timed
            expected = reference(fn, inputs[0], numerics.current(), device)
            for p in prepared[1:]:
                expected.require(p.fn, inputs[0], f"{label} ({p.configuration.name})")
            # this thread times: each round on the fastest of its GPU slot's CPUs (off a slot nothing moves)
            with affinity.turns_on_one_cpu([threading.get_native_id()]) as cpus:
                times = interleaved(prepared, inputs, device=device, warmup=settings.warmup, rounds=settings.rounds,
                                    repeats_per_round=settings.repeats_per_round, flush_l2=flush,
                                    min_seconds=settings.min_seconds, pick=cpus.pick)
    except Exception as err:  # a failed case is a row; the experiment goes on
        status = failure_status(err)
        message = f"{type(err).__name__}: {err}".strip()[:2000]
        log.warning("%s %s/%s: %s", label, pair, mode, message)
        done = {p.configuration.name: p for p in prepared}
        rows = [{**keys, **_untimed(c, pair, mode, device, settings, status, message,
                                    done[c.name].compile_columns() if c.name in done else None)}
                for c in configs]
        _release(device)
        return rows
    rows = []
    for p, samples in zip(prepared, times):
        common = {"pair": pair, "configuration": p.configuration.name, "compiled": p.configuration.compiled,
                  "mode": mode, "device": device.type, "status": "ok", "message": None,
                  **p.compile_columns(), "warmup": settings.warmup, "flush_l2": flush,
                  "rotating_inputs": len(inputs)}
        rows.extend({**keys, **common, "round": r, "repeat": k, "time_ms": t} for r, k, t in samples)
    c = prepared[1]
    log.info("%s %s/%s: eager %.4f ms, compiled %.4f ms (first call %.0f ms, %d graphs, Inductor cache %d hits "
             "%d misses)", label, pair, mode, _median(times[0]), _median(times[1]), c.first_call_ms, c.graphs,
             c.cache_hits, c.cache_misses)
    del prepared, fn, inputs
    _release(device)
    return rows


def _median(samples: list[tuple[int, int, float]]) -> float:
    ts = sorted(t for _, _, t in samples)
    return ts[len(ts) // 2] if ts else float("nan")


def _release(device: torch.device) -> None:
    torch._dynamo.reset()
    if device.type == "cuda":
        torch.cuda.empty_cache()
