"""Study B building blocks: matmul, convolution ablation, ResNet-50 convolutions, convolution blocks.

Timing tables hold one row per timed call (round, repeat) of one configuration in one case; a case that was not
timed (not_run, error, oom, wrong_output) is one row per configuration with null times. On eager rows `mode` names the
compiled mode the eager callable was interleaved with (study_b/configurations.py). Speedup tables are computed
from them by rule study_b_block_speedups: median(eager) / median(compiled) with a bootstrap interval.
"""
import polars as pl

from .common import STATUS

# Columns of every Study B timing row: which configuration, how it was timed, what its compilation cost.
TIMING = {
    "pair": pl.String,                 # cpu (interp vs cpp) | gpu (cuda vs triton)
    "configuration": pl.String,        # interp | cpp | cuda | triton
    "compiled": pl.Boolean,
    "mode": pl.String,                 # compile mode (on eager rows: the mode it was interleaved with)
    "device": pl.String,               # cpu | cuda
    **STATUS,
    "round": pl.Int64,                 # interleaving round (eager and compiled alternate within each)
    "repeat": pl.Int64,                # repeat within the round
    "time_ms": pl.Float64,             # one synchronised call (CUDA events on the GPU, perf_counter on the CPU)
    "first_call_ms": pl.Float64,       # wall time of the first call: compilation included, apart from time_ms
    "frames_compiled": pl.Int64,       # dynamo frames the first call compiled
    "graphs": pl.Int64,                # FX graphs produced
    "graph_breaks": pl.Int64,
    "recompiles": pl.Int64,            # frames compiled during warm-up (in the timed loop it is an error row)
    "cache_hits": pl.Int64,            # graphs of the first call served by Inductor's cache (a warm compile)
    "cache_misses": pl.Int64,          # graphs of the first call Inductor generated code for (a cold compile)
    "warmup": pl.Int64,
    "flush_l2": pl.Boolean,            # L2 cache overwritten before every timed call
    "rotating_inputs": pl.Int64,       # distinct input sets cycled through (1 = the same input every call)
}

# Columns of every speedup row: the two medians, the speedup and its interval.
SPEEDUP = {
    "pair": pl.String,
    "mode": pl.String,
    "eager_configuration": pl.String,
    "compiled_configuration": pl.String,
    **STATUS,                          # ok, or the not-ok status of either side and its message
    "eager_samples": pl.Int64,
    "compiled_samples": pl.Int64,
    "eager_median_ms": pl.Float64,
    "compiled_median_ms": pl.Float64,
    "compiled_first_call_ms": pl.Float64,
    "speedup": pl.Float64,             # eager median / compiled median: above 1 = compiled faster
    "speedup_low": pl.Float64,         # bootstrap interval (confidence: config study_b.blocks.bootstrap)
    "speedup_high": pl.Float64,
    "speedup_includes_one": pl.Boolean,
}

MATMUL_KEYS = {"n": pl.Int64, "dtype": pl.String}
ABLATION_KEYS = {"kernel": pl.Int64, "stride": pl.Int64, "padding": pl.Int64, "batch": pl.Int64,
                 "in_channels": pl.Int64, "out_channels": pl.Int64, "resolution": pl.Int64}
# A distinct convolution of ResNet-50: its parameters and the input size it sees in the model.
RESNET_CONV_KEYS = {"conv_id": pl.String, "in_channels": pl.Int64, "out_channels": pl.Int64, "kernel": pl.Int64,
                    "stride": pl.Int64, "padding": pl.Int64, "input_size": pl.Int64, "batch": pl.Int64}
BLOCK_KEYS = {"n": pl.Int64, "in_channels": pl.Int64, "channels": pl.Int64, "kernel": pl.Int64,
              "batch": pl.Int64, "resolution": pl.Int64}

SCHEMAS = {
    "study_b_matmul": {**MATMUL_KEYS, **TIMING},
    # numpy_*: NumPy's matmul on the CPU pair's inputs (configuration numpy), its speedup = eager / NumPy
    "study_b_matmul_speedups": {**MATMUL_KEYS, **SPEEDUP, "numpy_median_ms": pl.Float64, "numpy_speedup": pl.Float64,
                                "numpy_speedup_low": pl.Float64, "numpy_speedup_high": pl.Float64},
    "study_b_conv_ablation": {**ABLATION_KEYS, **TIMING},
    "study_b_conv_ablation_speedups": {**ABLATION_KEYS, **SPEEDUP},
    # isolated: each distinct convolution alone, end to end
    "study_b_resnet50_convs": {**RESNET_CONV_KEYS, "occurrences": pl.Int64, "layers": pl.String, **TIMING},
    # in model: one row per convolution layer per profiled forward pass of the whole model
    "study_b_resnet50_in_model": {
        **RESNET_CONV_KEYS,
        "layer": pl.String,            # module name in torchvision's resnet50, e.g. layer2.0.conv2
        "pair": pl.String,
        "configuration": pl.String,
        "compiled": pl.Boolean,
        "mode": pl.String,
        "device": pl.String,
        **STATUS,
        "iteration": pl.Int64,         # profiled forward pass
        "time_ms": pl.Float64,         # the layer's aten::convolution: its device kernels (GPU) or CPU time
        "time_source": pl.String,      # device_kernels | cpu_op
        "model_first_call_ms": pl.Float64,
        "frames_compiled": pl.Int64,
        "graph_breaks": pl.Int64,
    },
    # the two joined: per distinct convolution, the isolated speedup and the in-model (profiler) speedup
    "study_b_resnet50_conv_speedups": {
        **RESNET_CONV_KEYS,
        "occurrences": pl.Int64,
        "pair": pl.String,
        "mode": pl.String,
        "isolated_run_id": pl.String,  # the isolated timing job (run_id: the in-model job)
        "isolated_status": pl.String,
        "isolated_message": pl.String,
        "isolated_eager_median_ms": pl.Float64,
        "isolated_compiled_median_ms": pl.Float64,
        "isolated_speedup": pl.Float64,
        "isolated_speedup_low": pl.Float64,
        "isolated_speedup_high": pl.Float64,
        "isolated_speedup_includes_one": pl.Boolean,
        "in_model_status": pl.String,
        "in_model_message": pl.String,
        "in_model_eager_median_ms": pl.Float64,
        "in_model_compiled_median_ms": pl.Float64,
        "in_model_speedup": pl.Float64,
        "in_model_speedup_low": pl.Float64,
        "in_model_speedup_high": pl.Float64,
        "in_model_speedup_includes_one": pl.Boolean,
    },
    "study_b_conv_blocks": {**BLOCK_KEYS, **TIMING},
    "study_b_conv_blocks_speedups": {**BLOCK_KEYS, **SPEEDUP},
}
