"""Correct before fast: a compiled (or otherwise transformed) variant is timed only if it computes eager's output.

    ref = reference(model, example_args, numerics, device)    # eager's output on the example, once
    ref.require(compiled_fn, example_args, "resnet50 compiled")  # raises WrongOutput if it differs

Every transformed variant of Study B (end to end, every block compiled alone, selective blocks and segments, the
building blocks) passes `require` on the same input as eager before any timed round; a WrongOutput becomes the
row's status `wrong_output` (vision_models.status_of, cases.failure_status), never a time or a speedup. The
comparison and its tolerances are measure/numerics.check_output's; the float64 reference it may need is a
float64 copy of the eager module, built only when the direct comparison fails.
"""
from __future__ import annotations

import copy
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from torch import nn

from . import numerics as nx


class WrongOutput(RuntimeError):
    """A transformed variant's output differs from eager's beyond the numerics' tolerance."""

    status = "wrong_output"


def _clone(out):
    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (tuple, list)):
        return type(out)(_clone(o) for o in out)
    if isinstance(out, dict):
        return {k: _clone(v) for k, v in out.items()}
    return out


def _double(x):
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


@dataclass
class Reference:
    """Eager's output of one example under one numerics, and how to get its float64 counterpart."""
    output: object
    numerics: str
    fp64: Callable[[], object] | None = None
    _fp64_out: list = field(default_factory=list)

    def _exact(self):
        if not self._fp64_out:
            self._fp64_out.append(self.fp64())
        return self._fp64_out[0]

    def check(self, candidate) -> nx.OutputCheck:
        return nx.check_output(self.output, candidate, self.numerics,
                               self._exact if self.fp64 is not None else None)

    def require(self, fn: Callable, args: Sequence, label: str, device: torch.device | None = None) -> nx.OutputCheck:
        """Call fn(*args) (under the numerics' autocast on `device`) and raise WrongOutput unless it passes."""
        ctx = nx.autocast(self.numerics, device) if device is not None else nullcontext()
        with torch.no_grad(), ctx:
            result = self.check(fn(*args))
        if not result.ok:
            raise WrongOutput(f"{label}: output differs from eager's: {result.message}")
        return result


def reference(fn: Callable, args: Sequence, numerics: str, device: torch.device) -> Reference:
    """Eager fn(*args) under `numerics` (autocast where it has one); a float64 reference where fn is a module."""
    with torch.no_grad(), nx.autocast(numerics, device):
        out = _clone(fn(*args))
    fp64 = None
    if isinstance(fn, nn.Module):
        def fp64():
            off = torch.autocast(device.type, enabled=False)   # an ambient autocast would cast it down
            with torch.no_grad(), nx.applied("fp32"), off:
                return copy.deepcopy(fn).double()(*[_double(a) for a in args])
    return Reference(out, numerics, fp64)
