"""Study B vision-model tables: end to end, timing methods, per-layer times, oracles, selective compilation.

Measured tables have one row per timed call (round, repeat) or, for a variant that did not run, one row with
null times whose status says why (`wrong_output`: its output differed from eager's, so it was not timed). Every job pairs an eager configuration with a compiled one on one device
(`pair` cpu: interp/cpp, gpu: cuda/triton) and times them interleaved. Summary tables (vision_speedups,
vision_timing_summary, vision_layer_summary, vision_oracles, vision_selective_summary) are computed by rules;
their run_id lists every run_id they were computed from, comma-separated and sorted.

One job per (model, pair) (rule vision_model, study_b/models/job.py) writes its part of each of JOB_TABLES.
"""
import polars as pl

from .common import PHASE_MEASURES, STATUS
from .study_a_sweep import SCHEMAS as _SWEEP

JOB_TABLES = ("vision_e2e", "vision_builds", "vision_timing_methods", "vision_layer_times", "vision_oracles",
              "vision_selective", "vision_profile")

_CASE = {
    "model": pl.String,
    "pair": pl.String,            # cpu | gpu
    "configuration": pl.String,   # interp | cpp | cuda | triton
    "mode": pl.String,            # compile mode of the compiled side of the job (eager rows: the mode they pair)
    "batch_size": pl.Int64,
    "resolution": pl.Int64,
    "numerics": pl.String,        # fp32 | tf32 | bf16-autocast (measure/numerics.py), with its own output tolerance
    "memory_format": pl.String,   # contiguous | channels_last: of the model's weights and inputs
}
_SAMPLE = {"round": pl.Int64, "repeat": pl.Int64, "time_ms": pl.Float64}
# Rows measured under the protocol (study_b/models/protocol.py): process clean (no compiled code loaded) or
# compiled (a worker holding compiled variants); invocation: the fresh set of processes; round: the turn, repeat:
# the call within that turn's block; warmup_calls / steady: the variant's warm-up in that invocation.
_PROTOCOL = {"process": pl.String, "invocation": pl.Int64, "round": pl.Int64, "repeat": pl.Int64,
             "time_ms": pl.Float64, "warmup_calls": pl.Int64, "steady": pl.Boolean}
_INTERVAL = lambda name: {name: pl.Float64, f"{name}_low": pl.Float64, f"{name}_high": pl.Float64}  # noqa: E731
_SPEEDUP = {**_INTERVAL("speedup"), "speedup_includes_one": pl.Boolean}

SCHEMAS = {
    # Fig. 5.6: the whole model per call. variant: eager, compiled (torch.compile of the whole model),
    # eager_channels_last (model and input converted inside the call), eager_cuda_graphs (one captured graph),
    # eager_in_process (eager in the compiled variant's process, after its compiled code loaded: the drift).
    # The clean process's rows (eager and its baselines) are one measurement, repeated under every mode.
    "vision_e2e": {**_CASE, "variant": pl.String, **_PROTOCOL, **STATUS},
    # Where one call's time goes, per end-to-end variant (vision_e2e's variants and rows' columns): the profiled
    # pass of study_b.models.protocol.profile_calls calls in the variant's worker after the last timed turn of the
    # first invocation (measure/profiled.py; sweep_profile's columns: host loop unprofiled, then the device loop
    # under torch.profiler; device columns null with device_message without CUDA or CUPTI). status: ok, error / oom
    # (the pass failed or its worker died in it: the timed rows stand), not_run (the variant was not timed, or
    # profile_calls is 0). The clean process's variants repeat under every mode, as in vision_e2e.
    "vision_profile": {**_CASE, "variant": pl.String, "process": pl.String, "invocation": pl.Int64, **STATUS,
                       **{k: v for k, v in _SWEEP["sweep_profile"].items()
                          if k not in ("implementation", "numerics", "device", "cell", "batch_size", "resolution",
                                       "transfer", "status", "message")}},
    # One row per (job, step, variant), step e2e or selective: what building the variant cost and compiled.
    # first_call_ms includes compilation; graphs / graph_breaks / frames_compiled from dynamo's counters;
    # recompiles counts frames compiled by warm-up calls (a recompile in the timed loop is status error);
    # cache_hits / cache_misses: graphs Inductor served from its cache (warm compile) or generated (cold).
    "vision_builds": {**_CASE, "step": pl.String, "variant": pl.String, "first_call_ms": pl.Float64,
                      "frames_compiled": pl.Int64, "graphs": pl.Int64, "graph_breaks": pl.Int64, "recompiles": pl.Int64,
                      "cache_hits": pl.Int64, "cache_misses": pl.Int64,
                      **PHASE_MEASURES, **STATUS},
    # Fig. 5.7: timing variants. timing: pure | sync | timed | timed_sync; profiled: inside torch.profiler;
    # metric: e2e (per call) | arr_sum (sum of the block timers of one call; timed variants only).
    # device_ms: profiled e2e rows on the GPU, the kernels' device time per call (timing_methods.kernel_ms).
    "vision_timing_methods": {**_CASE, "timing": pl.String, "profiled": pl.Boolean, "metric": pl.String,
                              **_SAMPLE, "device_ms": pl.Float64, **STATUS},
    # Per-layer raw times (study_b/models/layers.py). measure: timer (block `block` timed with synchronisation,
    # configuration eager or compiled), prefix (blocks 0..block-1, block = 0 .. n), mixed_to_compiled /
    # mixed_to_eager (blocks 0..block-1 in one state, block `block` in the other; configuration = the compiled one).
    "vision_layer_times": {**_CASE, "measure": pl.String, "block": pl.Int64, "block_name": pl.String,
                           "block_kind": pl.String, **_SAMPLE, **STATUS},
    # Selective compilation measured end to end beside eager and the whole model compiled. variant: eager,
    # compiled, all_blocks (every block its own graph), dp_blocks / dp_segments (the programme's choice, each
    # compiled block its own graph / each run of compiled blocks one graph), btr_blocks (best of two runs).
    # eager and compiled are the end-to-end step's own rows (the same processes and turns); eager_in_process too.
    "vision_selective": {**_CASE, "variant": pl.String, "choice": pl.String, "predicted_ms": pl.Float64,
                         **_PROTOCOL, **STATUS},

    # Speedup of each variant over eager in the same job: ratio of the medians over invocations, its interval
    # resampled as pairs of turns (statistics.paired_speedup); invocations: the variant's ok ones; the study's
    # number where it gives one (Fig. 5.6: GPU, default mode, compiled).
    # eager_device_busy / device_busy: kernels' device time / wall time per call from the job's profiled `pure`
    # timing method (GPU; compiled: the timing methods' mode only): near 1 kernel-bound, far below launch-bound.
    "vision_speedups": {**_CASE, "variant": pl.String, "eager_ms": pl.Float64, **_INTERVAL("time_ms"),
                        **_SPEEDUP, "study_speedup": pl.Float64, "samples": pl.Int64, "invocations": pl.Int64,
                        "eager_device_busy": pl.Float64, "device_busy": pl.Float64, **STATUS},
    "vision_timing_summary": {**_CASE, "timing": pl.String, "profiled": pl.Boolean, "metric": pl.String,
                              **_INTERVAL("time_ms"), "device_busy": pl.Float64, "samples": pl.Int64},
    # The eager model as every step of a job timed it (step: e2e <mode>, e2e <mode> in-process, layers,
    # selective, timing_sync; process: clean = a worker with no compiled code, compiled = the compiled variant's
    # worker, job = the job's own process), and its ratio to the e2e step's clean eager with a bootstrap interval
    # (paired by turn where both took turns): 1 inside the interval = one baseline; in-process below 1 = drift.
    "vision_eager_baselines": {**{k: v for k, v in _CASE.items() if k not in ("configuration", "mode")},
                               "step": pl.String, "process": pl.String, **_INTERVAL("time_ms"),
                               **_INTERVAL("ratio_to_e2e"), "samples": pl.Int64, "invocations": pl.Int64},
    # Per block, by method timer (medians of synchronised block timers) or subtraction (differences of prefix
    # medians); speedup = eager / compiled with a bootstrap interval over rounds. Switch costs: subtraction only.
    "vision_layer_summary": {**_CASE, "method": pl.String, "block": pl.Int64, "block_name": pl.String,
                             "block_kind": pl.String, **_INTERVAL("eager_ms"), **_INTERVAL("compiled_ms"),
                             **_SPEEDUP, "to_compiled_ms": pl.Float64, "to_eager_ms": pl.Float64,
                             "dp_compiled": pl.Boolean},   # the dynamic programme compiles this block
    # Oracles per (model, pair): btr_timers (Table 5.1), btr_subtraction, dp (switch costs charged).
    # predicted_ms is the end-to-end time the choice predicts, comparable with reference_ms (eager, same method);
    # switch_model_ms: the choice's cost under the switch-cost model; exhaustive_*: the 2^n check (dp rows).
    "vision_oracles": {**_CASE, "oracle": pl.String, "blocks": pl.Int64, "choice": pl.String,
                       "compiled_blocks": pl.Int64, "reference_ms": pl.Float64, **_INTERVAL("predicted_ms"),
                       **_INTERVAL("predicted_speedup"), "switch_model_ms": pl.Float64,
                       "exhaustive_ms": pl.Float64, "exhaustive_choice": pl.String,
                       "dp_matches_exhaustive": pl.Boolean, "study_speedup": pl.Float64, "resamples": pl.Int64,
                       # held-out: chosen on the even rounds, predicted (point and interval) on the odd ones;
                       # exhaustive_ms is the optimum on the choosing rounds; same: one round did both
                       "prediction_rounds": pl.String},
    # Predicted against realised, per selective variant: realised speedup over eager in the same rounds.
    # prediction_error: realised ms / predicted ms = predicted speedup / realised speedup over one baseline.
    "vision_selective_summary": {**_CASE, "variant": pl.String, "choice": pl.String,
                                 **_INTERVAL("predicted_ms"), "predicted_speedup": pl.Float64,
                                 "eager_ms": pl.Float64, **_INTERVAL("time_ms"), **_SPEEDUP,
                                 **_INTERVAL("prediction_error"), "study_speedup": pl.Float64,
                                 "samples": pl.Int64, "invocations": pl.Int64, **STATUS},
}
