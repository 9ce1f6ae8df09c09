"""The building-block experiments' jobs: which cases each times (CASES; its tables and config section are
registry.py's).

Rule scripts call run_timing (one job = one experiment × pair × compile mode) and compile_cases (that job's graphs,
for the compile-cache warm-up); the speedup tables are speedups.py's, which imports no torch.
"""
from __future__ import annotations

from typing import Callable, Iterator

import torch

from ..configurations import pair_configurations, prepare
from . import conv_blocks, convolutions, matmul
from .cases import Builder, TimingSettings, pair_device, time_case
from .registry import experiment, job_not_run_reason

CaseSource = Callable[[dict, str, TimingSettings], Iterator[tuple[dict, Builder, str]]]

# Each experiment's cases, but resnet50_in_model's: it profiles ResNet-50's convolutions in the model instead.
CASES: dict[str, CaseSource] = {"matmul": matmul.cases, "conv_ablation": convolutions.ablation_cases,
                                "resnet50_convs": convolutions.resnet_cases, "conv_blocks": conv_blocks.cases}


def run_timing(name: str, config: dict, pair: str, mode: str, run_id: str, require_gpu: bool,
               cuda_available: bool) -> list[dict]:
    """Every row of one job: the experiment's cases for one pair and mode, each row with run_id."""
    experiment(name)  # an unknown name is refused, naming the known ones
    settings = TimingSettings.from_config(config)
    device, _ = pair_device(pair, settings)
    reason = job_not_run_reason(config, pair, mode, require_gpu, cuda_available)
    if name == "resnet50_in_model":
        rows = convolutions.profile_in_model(config, pair, mode, device, settings, not_run=reason)
    else:
        extras = matmul.extras(pair) if name == "matmul" else []
        rows = [row for keys, build, label in CASES[name](config, pair, settings)
                for row in time_case(build, pair, mode, device, settings, keys, label, not_run=reason,
                                     extras=extras)]
    return [{"run_id": run_id, **row} for row in rows]


def compile_cases(name: str, config: dict, pair: str, mode: str) -> int:
    """Compile every graph that run_timing(name, config, pair, mode, ...) compiles, the same way, without timing
    anything (the compile-cache warm-up's task, compile_cache.py); the number of cases compiled."""
    experiment(name)
    settings = TimingSettings.from_config(config)
    device, _ = pair_device(pair, settings)
    _, compiled = pair_configurations(pair)
    reason = job_not_run_reason(config, pair, mode, config["study_b"]["blocks"]["require_gpu"],
                                torch.cuda.is_available())
    if reason is not None:
        raise ValueError(f"{name} on pair {pair} in mode {mode} cannot run here: {reason}")
    with torch.no_grad():
        if name == "resnet50_in_model":
            model, x = convolutions.in_model_case(config, pair, device)
            prepare(model, compiled, mode, (x,), device)
            return 1
        n = 0
        for _, build, _ in CASES[name](config, pair, settings):
            fn, inputs = build(device)
            prepare(fn, compiled, mode, inputs[0], device)
            n += 1
        return n
