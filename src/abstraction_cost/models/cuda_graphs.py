"""A forward captured as a CUDA graph (torch.cuda.graphs) for one input shape and replayed, so that its kernels are
launched by one graph launch instead of one by one from Python: Study A's `eager-cudagraphs` and Study B's
`eager_cuda_graphs` baseline.

A graph reads its input from, and writes its output to, fixed device buffers: a call copies its input into the
graph's input buffer (one device-to-device copy, as torch.cuda.make_graphed_callables does) and returns the graph's
output buffer, which the next replay overwrites. The capture runs `WARMUP` eager calls on a side stream first (as
torch's documentation requires: lazy initialisation and cuDNN's algorithm choice happen outside the capture).
Under bf16-autocast the capture runs inside torch.autocast with its weight cache off (a cached cast would be
captured once and never refreshed). A CUDA GPU is required: elsewhere the registry makes its rows not_run.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Callable

import torch

WARMUP = 3  # eager calls on a side stream before the capture


def _autocast(numerics: str, device: torch.device):
    if numerics == "bf16-autocast":
        return torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=False)
    return nullcontext()


class Graphed:
    """fn(x) for inputs of example's shape, replayed from one CUDA graph."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], example: torch.Tensor, numerics: str = "fp32"):
        if example.device.type != "cuda":
            raise RuntimeError(f"CUDA graphs need a CUDA tensor, got one on {example.device}")
        device = example.device
        self.shape = example.shape
        self.input = example.detach().clone()
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.no_grad(), torch.cuda.stream(side), _autocast(numerics, device):
            for _ in range(WARMUP):
                fn(self.input)
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph), _autocast(numerics, device):
            self.output = fn(self.input)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape != self.shape:
            raise ValueError(f"a CUDA graph captured for input {tuple(self.shape)} was called with {tuple(x.shape)}")
        if x.data_ptr() != self.input.data_ptr():
            self.input.copy_(x)
        self.graph.replay()
        return self.output


class GraphedForward:
    """A forward that captures a new graph at each input shape it meets (the last one's memory let go first)."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], numerics: str = "fp32"):
        self.fn, self.numerics, self.graphed = fn, numerics, None

    def capture(self, example: torch.Tensor) -> None:
        self.graphed = None  # the last shape's graph and its memory pool, freed before the next capture
        self.graphed = Graphed(self.fn, example, self.numerics)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.graphed is None or self.graphed.shape != x.shape:
            self.capture(x)
        return self.graphed(x)
