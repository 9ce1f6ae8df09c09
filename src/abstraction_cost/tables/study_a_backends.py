"""Study A's backend comparison in evaluation: every implementation of the same ResNet-50 on one batch."""
import polars as pl

from .common import PHASE_MEASURES, STATUS

# Which model, on what, shared by both tables.
_KEYS = {
    "implementation": pl.String,     # eager | torchscript-python | torchscript-cpp | libtorch | aoti | cudnn | cudnn-graphs
    "backend": pl.String,            # SPEC's backend names: eager | torchscript | libtorch | aoti | cudnn
    "runtime": pl.String,            # the process the model runs in: python | cpp
    "method": pl.String,             # how it was made: module | script | trace | torch::nn | export+aoti
    "device": pl.String,
    "batch_size": pl.Int64,
    "resolution": pl.Int64,
    "numerics": pl.String,           # fp32 | tf32 | bf16-autocast (study_a.backends.numerics): eager's of the same
}

# The cudnn implementations' convolution algorithm choice (study_a.cudnn.algo: heuristic | find) and the workspace
# they allocated; null for the others (torch's choice is numerics.cudnn_benchmark, in the environment table).
CONV_ALGORITHMS = {"conv_algo": pl.String, "workspace_mib": pl.Float64}

SCHEMAS = {
    # One row per timed call of one implementation (rule eval_backend); a failed job is one row with its status.
    "backend_eval": {
        **_KEYS,
        "dataset": pl.String,         # whose init-weights file (channels, classes) every implementation loads
        "init": pl.String,
        "seed": pl.Int64,
        "channels": pl.Int64,
        "repeat": pl.Int64,           # index of the timed call; null on a failure row
        **STATUS,
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
        "repeats": pl.Int64,
        "time_per_sample_ms": pl.Float64,          # median over the timed calls
        "time_per_sample_ms_low": pl.Float64,      # bootstrap 95% interval of the median
        "time_per_sample_ms_high": pl.Float64,
        "speedup_vs_eager": pl.Float64,            # median(eager) / median(this): above 1 is faster than eager
        "speedup_vs_eager_low": pl.Float64,
        "speedup_vs_eager_high": pl.Float64,
        "speedup_vs_eager_includes_one": pl.Boolean,
        "mem_used_mib_max": pl.Float64,            # NVML, device-wide, during the eval phase
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
}
