"""Tables every experiment shares."""
import polars as pl

SCHEMAS = {
    # One row per measuring job: what the numbers of that job's rows were measured on and with.
    "environment": {
        "rule": pl.String,
        "job": pl.String,              # the job's wildcards, key=value joined by commas
        "started_at": pl.String,       # ISO 8601, UTC
        "ended_at": pl.String,         # ISO 8601, UTC: with started_at, which jobs overlapped on one GPU
        "hostname": pl.String,
        "device": pl.String,           # cuda | cpu
        "gpu_name": pl.String,
        "gpu_uuid": pl.String,
        "gpu_index": pl.Int64,         # NVML's index of the job's GPU (its GPU slot, measure/gpu_slots.py)
        "gpu_slot_wait_s": pl.Float64, # how long the job waited for its GPU slot, after its staged start
        "gpu_slot_taken_at": pl.String,  # ISO 8601, UTC: when it took the slot (its time on the GPU starts)
        "gpu_memory_total_mib": pl.Float64,
        "driver_version": pl.String,
        "cuda_version": pl.String,
        "cudnn_version": pl.String,
        "torch_version": pl.String,
        "torchvision_version": pl.String,
        "triton_version": pl.String,
        "python_version": pl.String,
        "cpu_model": pl.String,
        "cpu_count": pl.Int64,
        "torch_threads": pl.Int64,     # torch's intra-op threads in the job's process (its workers inherit them)
        "cpu_affinity": pl.String,     # the job's cores: a timing slot's, the untimed jobs', or why not pinned
        "cpu_governor": pl.String,     # cpufreq's scaling governor, where readable
        "load_avg_start": pl.Float64,  # the host's 1-minute load average when the job started measuring
        "load_avg_end": pl.Float64,
        "host_op_us_start": pl.Float64,     # one ATen op dispatched from Python, µs (measure/host_speed.py)
        "host_op_us_end": pl.Float64,
        "host_copy_gbps_start": pl.Float64, # a 64 MiB pageable host copy, GB/s
        "host_copy_gbps_end": pl.Float64,
        "probed_turns": pl.Int64,          # turns whose CPU was picked by a probe (measure/affinity.Turns)
        "turn_host_op_us": pl.Float64,     # the picked CPUs' probes, median: the host the turns met
        "worker_start_s": pl.Float64,      # its invocations' start of fresh workers, summed (measure/worker_phases.py)
        "worker_load_s": pl.Float64,       # and their loading (models, programs, compiled builds), summed
        "tf32_matmul": pl.Boolean,
        "tf32_cudnn": pl.Boolean,
        "cudnn_benchmark": pl.Boolean,
        "git_revision": pl.String,
        "git_dirty": pl.Boolean,
        "config_hash": pl.String,
        "nvml_status": pl.String,      # ok, or why NVML columns are null
        "sm_clock_mhz_before": pl.Float64,
        "sm_clock_mhz_after": pl.Float64,
        "mem_clock_mhz_before": pl.Float64,
        "mem_clock_mhz_after": pl.Float64,
        "temperature_c_before": pl.Float64,
        "temperature_c_after": pl.Float64,
        "power_w_before": pl.Float64,
        "power_w_after": pl.Float64,
        "throttle_reasons_before": pl.String,
        "throttle_reasons_after": pl.String,
        "resumes": pl.Int64,           # interrupted attempts whose finished steps this job kept (same run_id)
    },
}

# Columns the NVML sampler and the allocator add to any row summarising one phase of a run.
PHASE_MEASURES = {
    "mem_used_mib_max": pl.Float64,    # NVML device memory used, max over the phase's samples
    "alloc_peak_mib": pl.Float64,      # caching allocator's peak (torch.cuda.max_memory_allocated)
    "gpu_util_mean_pct": pl.Float64,
    "gpu_util_max_pct": pl.Float64,
    "sm_clock_mhz_mean": pl.Float64,
    "temperature_c_max": pl.Float64,
    "power_w_mean": pl.Float64,
    "nvml_samples": pl.Int64,
}

# Every measured row says whether it was measured: ok, or error / oom / missing / not_run with a message, or
# wrong_output: a compiled or transformed variant whose output differed from eager's (not timed, no speedup).
STATUS = {"status": pl.String, "message": pl.String}
