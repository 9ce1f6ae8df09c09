"""Study A's backend comparison in evaluation: every implementation of the same ResNet-50 on one batch."""
import polars as pl

from .common import PHASE_MEASURES, STATUS
from .study_a_sweep import SCHEMAS as _SWEEP

# Which model, on what, shared by both tables.
_KEYS = {
    "implementation": pl.String,     # implementations.names("backends"): eager, eager-cudagraphs, ..., cudnn-graphs
    "backend": pl.String,            # SPEC's backend names: eager | torchscript | libtorch | aoti | cudnn
    "runtime": pl.String,            # the process the model runs in: python | cpp
    "method": pl.String,             # how it was made: module | script | trace | torch::nn | export+aoti
    "device": pl.String,
    "batch_size": pl.Int64,
    "resolution": pl.Int64,
    "numerics": pl.String,           # fp32 | tf32 | bf16-autocast | cudnn-benchmark: eager's of the same
}

# The cudnn implementations' convolution algorithm choice (study_a.cudnn.algo: heuristic | find) and the workspace
# they allocated; null for the others (torch's choice is backend_flags.cudnn_benchmark, in the environment table).
CONV_ALGORITHMS = {"conv_algo": pl.String, "workspace_mib": pl.Float64}

SCHEMAS = {
    # One row per timed call of one implementation (rule eval_backend); an implementation not measured is one row
    # with its status, and so is an invocation of it that failed (interleaved protocol).
    "backend_eval": {
        **_KEYS,
        "dataset": pl.String,         # whose init-weights file (channels, classes) every implementation loads
        "init": pl.String,
        "seed": pl.Int64,
        "channels": pl.Int64,
        "repeat": pl.Int64,           # index of the timed call (within its invocation); null on a failure row
        **STATUS,
        "protocol": pl.String,        # interleaved | serial (study_a.backends.protocol.mode; docs/measurement.md)
        "transfer": pl.String,        # interleaved: uint8-pinned (the sweep's); null (serial): uint8 from pageable
        "invocation": pl.Int64,       # interleaved: the set of fresh worker processes this call was timed in
        "turn": pl.Int64,             # interleaved: the turn (block of calls) it was timed in; paired with eager's
        "warmup_calls": pl.Int64,     # interleaved: calls of its invocation's steady-state warm-up
        "steady": pl.Boolean,         # interleaved: whether that warm-up reached a steady state
        "exit_status": pl.Int64,      # a worker that died: its exit status (negative: the signal)
        "h2d_ms": pl.Float64,         # interleaved: the host-to-device copy within this call
        "time_ms": pl.Float64,        # host-to-device copy of the uint8 batch, normalisation, forward, logits
        "time_per_sample_ms": pl.Float64,
        "load_s": pl.Float64,         # loading the model in the measuring process (untimed)
        "prepare_s": pl.Float64,      # making the artifact: scripting, or export + AOTInductor compile
        **CONV_ALGORITHMS,
        **PHASE_MEASURES,             # of the job's eval phase (warm-up and timed calls), repeated on its rows
    },
    # One row per implementation (rule compare_backends): medians with bootstrap intervals, and parity errors
    # of its logits against eager's on the same batch, measured on the same device.
    "backend_comparison": {
        **_KEYS,
        **STATUS,
        "repeats": pl.Int64,                       # timed calls, over every invocation
        "protocol": pl.String,                     # interleaved | serial
        "invocations": pl.Int64,                   # interleaved: invocations measured ok (sets of fresh processes)
        "warmup_calls": pl.Int64,                  # interleaved: the longest steady-state warm-up of an invocation
        "steady": pl.Boolean,                      # interleaved: every invocation's warm-up reached a steady state
        "invocation_spread": pl.Float64,           # slowest invocation's median over the fastest's
        "paired_turns": pl.Int64,                  # turns paired with eager's for the speedup (interleaved)
        "time_per_sample_ms": pl.Float64,          # interleaved: median of the invocations' medians; serial: of calls
        "time_per_sample_ms_low": pl.Float64,      # 95% interval: two-level bootstrap (and invocations' t-interval)
        "time_per_sample_ms_high": pl.Float64,     # where interleaved; serial: bootstrap of the calls' median
        "speedup_vs_eager": pl.Float64,            # eager / this: above 1 is faster; interleaved: paired turns
        "speedup_vs_eager_low": pl.Float64,
        "speedup_vs_eager_high": pl.Float64,
        "speedup_vs_eager_includes_one": pl.Boolean,
        "mem_used_mib_max": pl.Float64,            # NVML, device-wide, during the eval phase (interleaved: with
                                                   # every other worker's memory beside it)
        "alloc_peak_mib": pl.Float64,              # torch's caching allocator peak in the measuring process
        "max_abs_logit_diff": pl.Float64,          # max |logits - eager logits| over the batch
        "max_rel_logit_diff": pl.Float64,          # max_abs_logit_diff / max |eager logits|
        "argmax_agreement": pl.Float64,            # fraction of samples with the same predicted class as eager
        "parity_tolerance": pl.Float64,            # study_a.backends.logit_tolerance
        "parity_ok": pl.Boolean,                   # max_rel_logit_diff <= parity_tolerance
        "parity_message": pl.String,               # why there is no parity error, when there is none
        "load_s": pl.Float64,
        "prepare_s": pl.Float64,
        **CONV_ALGORITHMS,
    },
    # The profiled pass of each implementation per numerics (study_a.backends.protocol.profile_calls), after its
    # timed turns of the first invocation: sweep_profile's columns but `cell` (the comparison has one).
    "backend_profile": {k: v for k, v in _SWEEP["sweep_profile"].items() if k != "cell"},
}
