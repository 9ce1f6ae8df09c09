"""Study A's inference sweep: every implementation over batch × resolution × input transfer mode (study Fig. 8-14),
the host-to-device copies at the study's point, and the top kernels at batch 32."""
import polars as pl

from .common import PHASE_MEASURES, STATUS

# The study's numbers (Levental & Orlova, the profiler section), beside the measured rows.
STUDY_TRANSFER = "float32-pageable"   # the input path of the study's PyTorch (its other implementations: unstated)
STUDY_H2D = {  # batch 32 at resolution 256: 32 × 3 × 256² float32 = 25.166 MB
    "pytorch": {"bytes": 25_165_824, "ms": 15.17},
    "others": {"bytes": 12_582_912, "ms": 7.55},
}
STUDY_RELU = {  # the ReLU kernel, second most often executed, ~12% of execution time
    "pytorch": {"grid": "(1024,2,1)", "mean_us": 690.6},
    "libtorch/cudnn": {"grid": "(512,2,1)", "mean_us": 372.6},
}

_KEYS = {
    "implementation": pl.String,   # implementations.py: eager, ..., compiled-<mode>, compiled-static-<mode>,
                                   # cudnn, cudnn-graphs
    "backend": pl.String,          # eager | torchscript | libtorch | aoti | compiled | cudnn
    "runtime": pl.String,          # python | cpp
    "transfer": pl.String,         # float32-pageable | float32-pinned | uint8-pinned
    "numerics": pl.String,         # fp32 | tf32 | bf16-autocast | cudnn-benchmark (measure/numerics.py):
                                   # speed against eager only within one numerics
    "device": pl.String,
    "dataset": pl.String,
}

SCHEMAS = {
    # One row per (numerics, implementation, cell); a cell is one (resolution, batch, transfer): medians and
    # bootstrap 95% intervals over the timed repeats.
    "sweep": {
        **_KEYS,
        "cell": pl.Int64,                     # position in walk order (resolution, then batch, then transfer)
        "batch_size": pl.Int64,
        "resolution": pl.Int64,
        **STATUS,                             # ok | oom (allocator's message, or "skipped: ...") | error | not_run
                                              # | wrong_output (a compiled build's logits not eager's: untimed)
        "repeats": pl.Int64,
        "time_ms": pl.Float64,                # per batch: H2D copy + normalisation + forward, CUDA events
        "time_ms_low": pl.Float64,
        "time_ms_high": pl.Float64,
        "time_per_sample_ms": pl.Float64,
        "time_per_sample_ms_low": pl.Float64,
        "time_per_sample_ms_high": pl.Float64,
        "h2d_bytes": pl.Int64,                # bytes of one batch's host-to-device copy
        "h2d_ms": pl.Float64,                 # that copy's own time within the timed calls (median)
        "h2d_ms_low": pl.Float64,
        "h2d_ms_high": pl.Float64,
        "build": pl.String,                   # how the model met this shape: none | dynamic | per-shape
        "build_s": pl.Float64,                # compiled: the shape's first call, its compile (never timed; kept
                                              # on an oom or error row too), from the sweep's compile cache where
                                              # its warm-up ran (study_a.sweep.compile_warm_up); aoti: the
                                              # package's build
        "cold_build_s": pl.Float64,           # compiled, where the warm-up built the shape: that first call, a
                                              # cold compile, off the GPU slot beside other jobs (else null)
        "prepare_s": pl.Float64,              # the cell's device buffer and host input made (untimed)
        "warmup_calls": pl.Int64,             # untimed calls before the timed ones: study_a.sweep.warmup on a
                                              # cold cell (its shape's first, or the first uint8-pinned), else 0
        "exit_status": pl.Int64,              # C++ programs: the exit status of a crashed process, on its row
        "attempt": pl.Int64,                  # which process of the job measured the cell (0, then restarts)
        "protocol": pl.String,                # interleaved (sweep_conductor) | serial (one process per
                                              # implementation, each cell's calls back to back)
        "invocations": pl.Int64,              # process invocations whose calls the times pool (interleaved)
        "blocks": pl.Int64,                   # turns the calls came in, over those invocations
        "steady": pl.Boolean,                 # every invocation's warm-up reached a steady state (not its cap)
        "invocation_spread": pl.Float64,      # slowest invocation's median over the fastest's
        **PHASE_MEASURES,                     # NVML and allocator over the cell (inputs, warm-up, timed calls;
                                              # interleaved: its first invocation, other workers' turns within)
    },
    # One row per turn of the interleaved sweep: an implementation's calls in one turn of one cell, invocation.
    # Turn t of every implementation of a cell ran back to back, so a comparison resamples turns as pairs
    # (measure/statistics.paired_speedup).
    "sweep_blocks": {
        "implementation": pl.String,
        "numerics": pl.String,
        "cell": pl.Int64,
        "invocation": pl.Int64,
        "turn": pl.Int64,
        "calls": pl.Int64,
        "time_ms": pl.Float64,                # the turn's median per batch
        "cpu": pl.Int64,                      # the CPU its workers' main threads took the turn on (null: unplaced)
        "host_op_us": pl.Float64,             # that CPU's host probe just before the turn, µs per dispatched op
                                              # (measure/affinity.Turns; null where not probed)
    },
    # Where one call's time goes, per (numerics, implementation, cell) of the interleaved sweep: the profiled pass
    # after the cell's timed turns of its first invocation (measure/profiled.py; the timed calls stay unprofiled).
    # Per call, medians of `profiled_calls` calls on the prepared cell (copy + forward, as timed).
    "sweep_profile": {
        "implementation": pl.String,
        "numerics": pl.String,
        "device": pl.String,
        "cell": pl.Int64,
        "batch_size": pl.Int64,
        "resolution": pl.Int64,
        "transfer": pl.String,
        **STATUS,                             # ok | error | oom (of the profiled pass) | not_run (cell not timed)
        "profiled_calls": pl.Int64,
        "host_issue_ms": pl.Float64,          # wall time from before the copy until the call returns, unsynchronised
        "host_cpu_ms": pl.Float64,            # the calling thread's CPU time in that span
        "wall_ms": pl.Float64,                # the call until the device finished (synchronised), unprofiled
        "device_source": pl.String,           # torch.profiler, LibTorch's (Kineto/CUPTI) or ac_cudnn's CUPTI activity
                                              # API; null where nothing profiled the device
        "device_ms": pl.Float64,              # sum of kernel durations (profiled loop)
        "memcpy_ms": pl.Float64,              # sum of copies and memsets on the device
        "kernels": pl.Float64,                # kernels the device ran (a CUDA graph's replayed kernels count)
        "launch_calls": pl.Float64,           # host launch API calls (cudaLaunchKernel ..., a graph launch is one)
        "device_busy_ms": pl.Float64,         # union of kernel and copy intervals
        "device_idle_ms": pl.Float64,         # wall_ms - device_busy_ms: the device waiting on the host
        "device_message": pl.String,          # why the device columns are null (no CUDA, CUPTI refused, no profiler)
    },
    # Speed against eager per (numerics, implementation, cell) of the interleaved sweep: eager's time over the
    # implementation's, from paired turns (study_a/sweep/summary.speedup_rows); above 1 = faster than eager.
    "sweep_speedups": {
        "numerics": pl.String,
        "implementation": pl.String,
        "cell": pl.Int64,
        "batch_size": pl.Int64,
        "resolution": pl.Int64,
        "transfer": pl.String,
        "baseline": pl.String,                # eager
        "speedup": pl.Float64,                # median over invocations of the ratio of the turns' medians
        "speedup_low": pl.Float64,            # 95% interval: invocations, then turns as pairs, resampled
        "speedup_high": pl.Float64,
        "speedup_includes_one": pl.Boolean,   # no measurable difference at this precision
        "paired_turns": pl.Int64,             # 0: measured one implementation at a time, no interval
    },
    # The host-to-device copy per (numerics, implementation, transfer) at the study's point, beside the study's
    # numbers.
    "sweep_h2d": {
        **_KEYS,
        "batch_size": pl.Int64,
        "resolution": pl.Int64,
        **STATUS,
        "h2d_bytes": pl.Int64,
        "h2d_mb": pl.Float64,                 # 10^6 bytes, as the study wrote MB
        "h2d_ms": pl.Float64,
        "h2d_ms_low": pl.Float64,
        "h2d_ms_high": pl.Float64,
        "study_h2d_mb": pl.Float64,           # the study's copy: 25.166 (PyTorch) or 12.583 (the others)
        "study_h2d_ms": pl.Float64,           # ~15.17 or ~7.55 (pageable; pinned "halves it again")
    },
    # Top kernels per (numerics, implementation) at batch 32 and the kernel resolution; the study's ReLU rows
    # have source "study" (numerics null: the study does not say). From the sweep's profiled pass of the point where
    # it is a cell of the grid (source: the pass's device profiler); else kernel jobs, the C++ programs' rows from
    # Nsight Compute over their timed calls (message: what was profiled; without ncu, one not_run row).
    "sweep_kernels": {
        "implementation": pl.String,
        "transfer": pl.String,
        "numerics": pl.String,
        "device": pl.String,
        "batch_size": pl.Int64,
        "resolution": pl.Int64,
        "source": pl.String,                  # the profiler (torch.profiler, Kineto, CUPTI) | ncu <version> | study
        **STATUS,
        "rank": pl.Int64,                     # 1 = most total device time
        "kernel": pl.String,
        "calls": pl.Int64,                    # per inference call
        "total_us": pl.Float64,               # per inference call
        "mean_us": pl.Float64,                # per kernel launch
        "share": pl.Float64,                  # of the implementation's total kernel time
        "grid": pl.String,                    # "(x,y,z)"
        "block": pl.String,
    },
}
