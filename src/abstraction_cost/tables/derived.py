"""Tables the report draws that are computed from measured tables by the rules of workflow/rules/derived.smk
(derived/*.py): precision per experiment, energy per sample, compile break-even, Study B's per-layer oracle curve
and the convolution speedup predictor. A row's run_id lists the run_ids of the rows it was computed from,
comma-separated and sorted."""
import polars as pl

from .common import STATUS

SCHEMAS = {
    # FLOPs of one forward pass per model and input (derived/flops.py; rule flops, which has an environment row).
    "flops": {
        "study": pl.String,                # study_a | study_b
        "model": pl.String,
        "batch_size": pl.Int64,
        "resolution": pl.Int64,
        "flops": pl.Int64,                 # null where torch cannot count the forward (status error, the reason)
        "flops_per_sample": pl.Float64,
        **STATUS,                          # ok: message says what FlopCounterMode counts
    },
    # How precise each experiment's numbers are: one row per (experiment, quantity) with intervals.
    "precision": {
        "experiment": pl.String,           # the table the numbers come from
        "quantity": pl.String,             # the column whose interval is summarised
        "rows": pl.Int64,                  # ok rows with a value
        "rows_with_interval": pl.Int64,
        "rel_width_median": pl.Float64,    # (high - low) / value, median over the rows with an interval
        "rel_width_p90": pl.Float64,
        "rel_width_max": pl.Float64,
        "includes_one": pl.Int64,          # ratios only: rows whose interval holds 1 (no measurable difference)
        "warmup_calls": pl.String,         # untimed calls before the timed ones, "min–max" (null: not recorded)
        "timed_calls": pl.String,          # timed calls per row, "min–max"
        "invocations": pl.String,          # process invocations per row, "min–max"; "1" where the table has none
        "spread": pl.Float64,              # the experiment's own spread measure (see spread_measure)
        "spread_measure": pl.String,       # what `spread` is, or why there is none
    },
    # Energy per sample: NVML's mean board power over a phase × the phase's time per sample. NVML's power is the
    # whole GPU's, sampled every measure.nvml_interval_ms over the phase (inputs, warm-up and timed calls); a phase
    # too short to sample has no energy, and its message says so.
    "energy": {
        "experiment": pl.String,           # sweep | backend_comparison | vision_e2e
        "implementation": pl.String,       # Study A implementation, or Study B model/variant
        "numerics": pl.String,
        "transfer": pl.String,
        "batch_size": pl.Int64,
        "resolution": pl.Int64,
        **STATUS,
        "time_per_sample_ms": pl.Float64,
        "power_w_mean": pl.Float64,
        "nvml_samples": pl.Int64,
        "gpu_util_mean_pct": pl.Float64,
        "energy_per_sample_j": pl.Float64,
    },
    # After how many calls a build pays for itself: build cost / (eager's time per call − the build's), with the
    # range from the speedup's interval. Null where the build is not measurably faster than eager.
    "compile_breakeven": {
        "experiment": pl.String,           # backend_comparison | sweep | vision_speedups | study_b_*_speedups
        "implementation": pl.String,
        "case": pl.String,                 # what else identifies the row (cell, model, n, ...)
        "numerics": pl.String,
        "batch_size": pl.Int64,
        "resolution": pl.Int64,
        "build_s": pl.Float64,             # the build's one-off cost
        "build_source": pl.String,         # which column it comes from
        "eager_ms": pl.Float64,            # eager's time per call
        "time_ms": pl.Float64,             # the build's time per call
        "speedup": pl.Float64,
        "speedup_low": pl.Float64,
        "speedup_high": pl.Float64,
        "breakeven_calls": pl.Float64,     # build_s / saving per call
        "breakeven_calls_low": pl.Float64,  # from the speedup interval's high end
        "breakeven_calls_high": pl.Float64,  # from its low end (null: the interval reaches 1, may never pay)
        **STATUS,                          # ok, or never (not measurably faster) / missing (no build time)
    },
    # Study B Fig. 5.9: per block, the cumulative time of eager, the whole model compiled block by block, the
    # best-of-two-runs oracle and the dynamic programme's choice, from vision_layer_summary (one method).
    "vision_oracle_curve": {
        "model": pl.String,
        "pair": pl.String,
        "mode": pl.String,
        "batch_size": pl.Int64,
        "numerics": pl.String,
        "memory_format": pl.String,
        "method": pl.String,               # timer | subtraction
        "block": pl.Int64,
        "block_name": pl.String,
        "eager_cum_ms": pl.Float64,
        "compiled_cum_ms": pl.Float64,
        "oracle_cum_ms": pl.Float64,       # Σ min(eager, compiled) up to and with the block
        "dp_cum_ms": pl.Float64,           # the dynamic programme's choice, switch costs left out
        "oracle_speedup": pl.Float64,      # eager_cum_ms / oracle_cum_ms
    },
    # Study B Fig. 5.4: an MLP predicting a ResNet-50 convolution's speedup from its parameters, each prediction
    # made by a model that did not see the convolution (leave-one-out).
    "conv_predictor": {
        "pair": pl.String,
        "mode": pl.String,
        "target": pl.String,               # isolated | in_model
        "conv_id": pl.String,
        "measured_speedup": pl.Float64,
        "predicted_speedup": pl.Float64,   # leave-one-out MLP
        "baseline_speedup": pl.Float64,    # leave-one-out mean of the others: what a predictor must beat
        "relative_error": pl.Float64,      # |predicted / measured - 1|
        "within_5pct": pl.Boolean,
        "baseline_within_5pct": pl.Boolean,
    },
    "conv_predictor_summary": {
        "pair": pl.String,
        "mode": pl.String,
        "target": pl.String,
        **STATUS,                          # not_run: too few convolutions to hold one out
        "convolutions": pl.Int64,
        "within_5pct": pl.Float64,         # fraction of held-out predictions within 5% of the measured speedup
        "baseline_within_5pct": pl.Float64,
        "median_relative_error": pl.Float64,
        "study_within_5pct": pl.Float64,   # the study: within 5% with 95% accuracy
    },
    # Where each level's time goes per Study A sweep cell and implementation (derived/decomposition.py): the timed
    # call split by the pairs that differ by one level. Per call, ms; a level the implementation does not carry is
    # 0, one whose pair lacks an ok row null (message). Study B's end-to-end variants (experiment vision_e2e): the
    # call split into host (python + dispatch + launch together), device work and other, from vision_profile.
    "decomposition": {
        "experiment": pl.String,           # sweep (every cell) | backend_comparison (its one cell, cell 0) | vision_e2e
        "numerics": pl.String,
        "implementation": pl.String,       # Study A implementation | Study B end-to-end variant
        "cell": pl.Int64,                  # Study A; null for vision_e2e
        "batch_size": pl.Int64,
        "resolution": pl.Int64,
        "transfer": pl.String,
        "model": pl.String,                # vision_e2e: the model, pair (cpu | gpu), memory format and compile mode
        "pair": pl.String,                 # (mode null: the clean process's eager and baselines, one per setting)
        "memory_format": pl.String,
        "mode": pl.String,
        **STATUS,                          # ok | partial (a level or the device time missing: message says which)
        "time_ms": pl.Float64,             # the timed call (sweep; backend_comparison's median per batch)
        "transfer_ms": pl.Float64,         # its H2D copy (sweep.h2d_ms; the median of backend_eval.h2d_ms)
        "python_ms": pl.Float64,           # eager - torchscript-cpp, on implementations that run the interpreter
        "dispatch_ms": pl.Float64,         # libtorch - cudnn, on implementations through ATen's dispatcher
        "launch_ms": pl.Float64,           # cudnn - cudnn-graphs, on implementations that launch kernel by kernel
        "device_ms": pl.Float64,           # the kernels' summed time (sweep_profile, backend_profile)
        "host_ms": pl.Float64,             # vision_e2e: python + dispatch + launch together, wall - device busy
        "other_ms": pl.Float64,            # time - transfer - carried levels - device (negative: overlap)
        "fusion_ms": pl.Float64,           # compiled, aoti: eager's device_ms - the build's (kernel time saved)
        "launch_saved_ms": pl.Float64,     # vision_e2e eager_cuda_graphs: eager's time - the graph's
        "host_issue_ms": pl.Float64,       # sweep_profile: until the call returns, unsynchronised
        "host_cpu_ms": pl.Float64,
        "kernels": pl.Float64,
        "launch_calls": pl.Float64,
        "device_idle_ms": pl.Float64,
        "bound": pl.String,                # host (host issue > device busy: the device waits) | device | null
    },
    # Achieved TFLOP/s against the run's own matmul peak (derived/roofline.py): Study A's sweep cells and Study B's
    # vision models (GPU pair), FLOPs from table flops.
    "roofline": {
        "study": pl.String,                # study_a | study_b
        "model": pl.String,
        "implementation": pl.String,       # Study A implementation | Study B variant (eager, compiled, ...)
        "numerics": pl.String,
        "batch_size": pl.Int64,
        "resolution": pl.Int64,
        "transfer": pl.String,             # Study A only
        **STATUS,                          # ok | missing (no FLOP count or time: message)
        "time_ms": pl.Float64,             # per forward of the batch
        "device_ms": pl.Float64,           # its kernels' time (sweep_profile), where profiled
        "flops": pl.Int64,
        "achieved_tflops": pl.Float64,     # flops / time_ms
        "device_tflops": pl.Float64,       # flops / device_ms
        "peak_tflops": pl.Float64,         # the matmul study's best GPU call in this run (its numerics only)
        "peak_of": pl.String,              # which matmul reached it
        "fraction_of_peak": pl.Float64,    # achieved_tflops / peak_tflops
    },
}
