"""Numerics as an axis of the experiments, and the output check every transformed variant passes before timing.

Numerics (config keys study_a.backends.numerics, study_a.sweep.numerics, study_b.models.numerics):

    fp32           float32 throughout, TF32 off for matmuls and convolutions (the study's setting)
    tf32           float32 tensors with TF32 for convolutions (PyTorch's default) and matmuls (precision 'high',
                   the one line PyTorch and Inductor recommend on Ampere and later): what most users get
    bf16-autocast  torch.autocast(bfloat16) around the forward, weights and inputs float32
    cudnn-benchmark  fp32 with torch.backends.cudnn.benchmark on: cuDNN times its convolution algorithms at each
                   new shape (at a worker's first, untimed call, with no other worker loading beside it:
                   implementations.times_algorithms) and keeps the fastest, as many users run; the C++ programs
                   get --cudnn-benchmark 1 (ac_cudnn: --conv-algo find). Study A only

The config block `backend_flags` ({tf32, cudnn_benchmark}) holds the process-wide switches; a job of one numerics
sets them from its name (job_config). set_tf32 is the only setter of the TF32 flags.

`applied(name)` sets a numerics for a block and restores the previous flags; `apply(name)` sets it for the rest
of the process (a job that measures one numerics).

check_output follows PyTorch's dynamo benchmark runner (torch._dynamo.utils.same): a candidate passes if it is
close to eager's output within the numerics' tolerance (scaled by the largest |eager| value, so random-weight
logits of any scale compare alike); where float32 cannot be exact, a failing candidate still passes when its
error against a float64 reference is at most `FP64_MULTIPLIER` times eager's own error against that reference
(the runner's rule: the compiled output is no worse than eager's); under bf16-autocast the check is cosine
similarity of the flattened outputs, as the runner does for reduced precision.

torch is imported by the functions that use it: the workflow checks a config's numerics against NUMERICS while it
builds its DAG (study_a/sweep/cells.py), where importing torch would cost seconds at every start.
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    import torch

NUMERICS = ("fp32", "tf32", "bf16-autocast", "cudnn-benchmark")
# The runner's multiplier (torch/_dynamo/utils.py `same`): compiled error may be this many times eager's.
FP64_MULTIPLIER = 2.0


@dataclass(frozen=True)
class Tolerance:
    relative: float          # max |candidate - eager| / max |eager|
    cosine: float | None     # minimum cosine similarity, where the check is by cosine instead


# fp32's is the runner's default (`same`'s tol): float32 implementations of ResNet-50 agree within a few 1e-6
# of the largest logit, TF32 convolutions differ by a few 1e-4, so TF32 running in an fp32 row fails the check.
TOLERANCES = {
    "fp32": Tolerance(relative=1e-4, cosine=None),
    "tf32": Tolerance(relative=2e-2, cosine=None),
    "bf16-autocast": Tolerance(relative=1e-1, cosine=0.99),
    "cudnn-benchmark": Tolerance(relative=1e-4, cosine=None),  # fp32's: other algorithms, the same arithmetic
}


def check_numerics(name: str, key: str = "numerics") -> str:
    if name not in NUMERICS:
        raise ValueError(f"unknown numerics {name!r} (config key {key}); allowed: {list(NUMERICS)}")
    return name


# Why a C++ program's row is not_run under bf16-autocast (Study A's backend comparison and sweep).
NO_CPP_AUTOCAST = "bf16-autocast is torch.autocast in Python; the C++ programs have no autocast"


def job_config(config: dict, name: str, key: str) -> dict:
    """The config of a job that measures one numerics: config backend_flags.tf32 set as `name` wants it, which
    measure/run.measured_run applies to the process (and records in the environment row) and
    backends/native.common_flags passes to the C++ programs. `key` names the config list `name` came from."""
    check_numerics(name, key)
    flags = config["backend_flags"]
    return {**config, "backend_flags": {**flags, "tf32": name == "tf32",
                                        "cudnn_benchmark": flags["cudnn_benchmark"] or name == "cudnn-benchmark"}}


def tolerance(name: str) -> Tolerance:
    return TOLERANCES[check_numerics(name)]


def set_tf32(on: bool) -> None:
    """TF32 for convolutions and matmuls on or off: the process's only setter of these flags."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    torch.set_float32_matmul_precision("high" if on else "highest")


def apply(name: str) -> None:
    """Set the TF32 flags of `name` for the rest of the process (autocast is applied per call: autocast())."""
    set_tf32(check_numerics(name) == "tf32")


def current() -> str:
    """The numerics the process's flags set now (fp32 or tf32; autocast is per call, not a flag)."""
    import torch
    return "tf32" if torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32 else "fp32"


@contextmanager
def applied(name: str) -> Iterator[None]:
    """`name`'s TF32 flags inside the block, the previous ones restored after it."""
    import torch
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.get_float32_matmul_precision())
    apply(name)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])


def autocast(name: str, device: torch.device):
    """The autocast context of `name` on `device` (a null context for fp32 and tf32)."""
    if check_numerics(name) == "bf16-autocast":
        import torch
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return nullcontext()


def under(name: str, fn: Callable, device: torch.device) -> Callable:
    """fn called inside `name`'s autocast (fn itself where there is none)."""
    if name != "bf16-autocast":
        return fn

    def call(*args):
        with autocast(name, device):
            return fn(*args)
    return call


@dataclass(frozen=True)
class OutputCheck:
    ok: bool
    max_abs_diff: float | None
    max_rel_diff: float | None      # max_abs_diff / max |eager|
    message: str | None             # why it failed, or how it passed where not by the direct comparison


def _flat(out) -> torch.Tensor:
    """One float64 vector of every tensor in an output (a tensor, or a tuple/list/dict of them)."""
    import torch
    if isinstance(out, torch.Tensor):
        return out.detach().reshape(-1).double().cpu()
    if isinstance(out, dict):
        out = [out[k] for k in sorted(out)]
    if isinstance(out, (tuple, list)):
        parts = [_flat(o) for o in out]
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)
    raise TypeError(f"cannot compare an output of type {type(out).__name__}")


def _shapes(out) -> list:
    import torch
    if isinstance(out, torch.Tensor):
        return [tuple(out.shape)]
    if isinstance(out, dict):
        return [s for k in sorted(out) for s in _shapes(out[k])]
    return [s for o in out for s in _shapes(o)]


def check_output(reference, candidate, numerics: str,
                 fp64_reference: Callable[[], object] | None = None) -> OutputCheck:
    """Is `candidate` eager's `reference` within `numerics`' tolerance? fp64_reference (called only where the
    direct comparison fails) gives the float64 output for the runner's no-worse-than-eager rule."""
    import torch
    tol = tolerance(numerics)
    if _shapes(reference) != _shapes(candidate):
        return OutputCheck(False, None, None, f"output shapes {_shapes(candidate)} differ from eager's "
                                              f"{_shapes(reference)}")
    ref, cand = _flat(reference), _flat(candidate)
    finite_ref, finite_cand = torch.isfinite(ref), torch.isfinite(cand)
    if not torch.equal(finite_ref, finite_cand) or not torch.equal(ref[~finite_ref], cand[~finite_cand]):
        return OutputCheck(False, None, None, "non-finite values (nan/inf) differ from eager's")
    ref, cand = ref[finite_ref], cand[finite_cand]
    if ref.numel() == 0:
        return OutputCheck(True, 0.0, 0.0, None)
    diff = float((cand - ref).abs().max())
    scale = float(ref.abs().max())
    rel = diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))
    if tol.cosine is not None:
        cos = float(torch.nn.functional.cosine_similarity(ref, cand, dim=0)) if scale > 0 else 1.0
        ok = cos >= tol.cosine
        return OutputCheck(ok, diff, rel, None if ok else
                           f"cosine similarity {cos:.5f} to eager's output below {tol.cosine} ({numerics})")
    if rel <= tol.relative:
        return OutputCheck(True, diff, rel, None)
    if fp64_reference is not None:
        exact = _flat(fp64_reference())[finite_ref]
        eager_err = float((ref - exact).abs().max())
        cand_err = float((cand - exact).abs().max())
        if cand_err <= FP64_MULTIPLIER * eager_err + tol.relative * scale / 10:
            return OutputCheck(True, diff, rel, f"passed against float64: error {cand_err:.3g} within "
                                                f"{FP64_MULTIPLIER}x eager's {eager_err:.3g}")
        return OutputCheck(False, diff, rel, f"max |Δ| {diff:.3g} = {rel:.3g} of max |eager| > {tol.relative} "
                                             f"({numerics}); against float64 {cand_err:.3g}, eager's {eager_err:.3g}")
    return OutputCheck(False, diff, rel, f"max |Δ| {diff:.3g} = {rel:.3g} of max |eager| > {tol.relative} "
                                         f"({numerics})")
