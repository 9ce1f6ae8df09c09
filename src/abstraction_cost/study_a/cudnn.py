"""Backend `cudnn`: Study A's ResNet-50 written by hand against cuDNN and cuBLAS (native/cudnn, `ac_cudnn`).

The program takes ac_libtorch's flags and writes its records (programs/native.py launches both and turns the
records into rows), with one difference: instead of torch's `--cudnn-benchmark` it takes the convolution
algorithm choice of `study_a.cudnn` (`--conv-algo heuristic|find`, `--workspace-limit-mib`), and it records
`conv_algo` and `workspace_mib` on every phase and eval record. `cudnn-graphs` is the same program replaying each
step as a CUDA graph. It runs on a CUDA GPU only: elsewhere its rows are not_run. In the inference sweep
(study_a/sweep/) both are implementations, launched as `ac_cudnn sweep`.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from .. import implementations
from ..programs import native

IMPLEMENTATIONS = implementations.of_program("cudnn")
NOT_RUN_REASON = implementations.REGISTRY["cudnn"].gpu_reason


def program_path() -> Path:
    return native.program_path("cudnn")


def conv_flags(config: dict) -> list[str]:
    """study_a.cudnn as flags: how convolution algorithms are chosen and the workspace they may use."""
    settings = config["study_a"]["cudnn"]
    return ["--conv-algo", str(settings["algo"]), "--workspace-limit-mib", str(int(settings["workspace_limit_mib"]))]


def with_conv_flags(command: list[str], config: dict) -> list[str]:
    """An ac_libtorch command line's flags for ac_cudnn (train, eval, sweep): torch's --cudnn-benchmark becomes
    study_a.cudnn's algorithm choice, or `find` (cuDNN's own timing of each algorithm, once per shape, untimed)
    where the job asks for cudnn.benchmark (numerics cudnn-benchmark)."""
    i = command.index("--cudnn-benchmark")
    flags = conv_flags(config)
    if str(command[i + 1]) == "1":
        flags[flags.index("--conv-algo") + 1] = "find"
    return command[:i] + flags + command[i + 2:]


def train_command(program: Path, data_dir: str | os.PathLike, manifest: dict, weights: str | os.PathLike,
                  order: str | os.PathLike, settings, config: dict, device: torch.device, graphs: bool = False,
                  save_weights: str | os.PathLike | None = None, log_steps: bool = False) -> list[str]:
    """`ac_cudnn train`: native.train_command's flags, with study_a.cudnn's algorithm choice."""
    command = native.train_command(program, data_dir, manifest, weights, order, settings, config, device,
                                   save_weights=save_weights, log_steps=log_steps)
    command = with_conv_flags(command, config)
    return command + ["--graphs", "1"] if graphs else command


def eval_command(program: Path, implementation: str, input_dir: str | os.PathLike, manifest: dict,
                 batch_size: int, warmup: int, repeats: int, config: dict, device: torch.device,
                 weights: str | os.PathLike, classes: int, logits_out: str | os.PathLike | None = None) -> list[str]:
    """`ac_cudnn eval --model cudnn|cudnn-graphs`: native.eval_command's flags, with study_a.cudnn's."""
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"{implementation!r} is not one of {IMPLEMENTATIONS}")
    command = native.eval_command(program, implementation, input_dir, manifest, batch_size, warmup, repeats, config,
                                  device, logits_out=logits_out, weights=weights, classes=classes)
    return with_conv_flags(command, config)


def training_rows(run, result: native.Result) -> list[dict]:
    """native.training_rows, each phase row with the algorithm choice and workspace its record carries."""
    rows = native.training_rows(run, result)
    algorithms = {(r["epoch"], r["phase"]): {k: r.get(k) for k in ("conv_algo", "workspace_mib")}
                  for r in result.of_kind("phase")}
    return [{**row, **algorithms.get((row["epoch"], row["phase"]), {})} for row in rows]


def not_run(device: torch.device) -> list[dict]:
    """The training job's one row where there is no CUDA GPU to run on."""
    return [{"epoch": None, "phase": None, "status": "not_run", "message": NOT_RUN_REASON.format(device=device.type)}]
