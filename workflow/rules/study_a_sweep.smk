# Study A's inference sweep (issue 10; study Fig. 8-14 and its profiler section): every implementation of
# study_a.sweep.implementations over batch × resolution × input transfer mode, in every numerics of
# study_a.sweep.numerics, on the prepared test images of study_a.backends.dataset with the same init weights as
# the backend comparison.
# - sweep_inputs: `pool` test images resized once per resolution (study_a/transfer.py)
# - package_aoti_sweep: one AOTInductor package with dynamic batch and resolution (study_a/aoti_dynamic.py)
# - sweep: interleaved (the default protocol), one job per numerics and shard (study_a.sweep.shards: whole
#   resolutions each, study_a/sweep/shards.py) runs every implementation in turns (study_a/sweep/interleaved.py);
#   serial, one process per implementation walks every cell of resolution × batch × transfer mode in each
#   numerics in turn (study_a/sweep/serial.py; start-up paid once), the numerics set before its model is built (TF32
#   flags in Python, --tf32 for the C++ programs); one table per job; concat_sweep
# - sweep_h2d: the host-to-device copy at the study's point beside the study's numbers
# - sweep_kernels: top kernels per (numerics of kernels.numerics, implementation) at the kernel point, with the
#   study's ReLU rows: written by the interleaved sweep's jobs from the point's profiled pass where the point is a
#   cell of the grid (KERNELS_FROM_SWEEP), else by sweep_kernels_job (torch.profiler; the C++ programs under Nsight
#   Compute, programs/ncu.py)
# The AOTInductor package is one for every numerics, as the backend comparison's: its convolutions and matmuls
# are ATen calls that follow the flags ac_libtorch sets from --tf32.
# SWEEP (the settings), SWEEP_PROTOCOL, SWEEP_JOBS and the jobs' input functions are in common.smk.

from abstraction_cost.study_a.sweep import shards as _sweep_shards


localrules: concat_sweep, sweep_h2d, concat_sweep_kernels  # seconds: run where Snakemake runs


rule sweep_inputs:
    input:
        data=PREPARED.format(dataset=BACKENDS["dataset"]),
    output:
        directory(f"{SWEEP_DIR}/inputs"),
    log:
        "logs/study_a/sweep/inputs.log",
    params:
        grid=(SWEEP.pool, SWEEP.resolutions),
    priority: INPUT_PRIORITY
    script:
        "../../scripts/sweep_inputs.py"


rule package_aoti_sweep:
    input:
        weights=BACKENDS_WEIGHTS,
    output:
        directory(f"{SWEEP_DIR}/aoti"),
    log:
        "logs/study_a/sweep/package-aoti.log",
    params:
        grid=(SWEEP.batches, SWEEP.resolutions, config["device"], config["backend_flags"]),
    threads: 4  # compiling runs beside timing jobs, so it may not take every core
    resources:
        **cluster_gpu(DEVICE == "cuda"),
    priority: INPUT_PRIORITY
    script:
        "../../scripts/package_aoti_sweep.py"


SWEEP_GRID = (SWEEP.batches, SWEEP.resolutions, SWEEP.transfers, SWEEP.warmup, SWEEP.repeats, SWEEP.cell_budget_s,
              SWEEP.compile_shapes, config["backend_flags"], config["study_a"]["sweep"].get("protocol"),
              reads(*MEASURED, "study_a.sweep.require_gpu", "study_a.cudnn"))  # and what a measuring job reads

if SWEEP_PROTOCOL.mode == "interleaved":
    # study_a.sweep.shards: whole resolutions per shard, balanced by estimated cost (study_a/sweep/shards.py)
    SWEEP_SHARDS = list(range(len(_sweep_shards.of_config(config))))

    rule compile_cache_sweep:
        # one sweep job's torch.compile entries built into the sweep's Inductor cache before the job, off its GPU
        # slot, by the job's own workers (study_a/sweep/compile_warm_up.py); one per job, with its config as params
        input:
            unpack(lambda wildcards: {k: v for job in SWEEP_JOBS if _implementations.compiles(job)
                                      for k, v in sweep_inputs_of(job).items()}),
        output:
            manifest=f"{SWEEP_DIR}/compile-cache-manifests/{{numerics}}-shard{{shard}}.json",
        wildcard_constraints:
            numerics="fp32|tf32|bf16-autocast",
            shard=r"\d+",
        log:
            "logs/study_a/sweep/compile-cache-{numerics}-shard{shard}.log",
        params:
            cache_dir=SWEEP_CACHE_DIR,
            grid=SWEEP_GRID,  # the job's: a change builds again
            implementations=SWEEP_JOBS,
            shards=len(SWEEP_SHARDS),
            torch_version=TORCH_VERSION,
        threads: MODEL_WARM_UP_THREADS  # a compile entry's worker each (gpu-smoke's two), sharing the threads
        priority: LONG_WARM_UP_PRIORITY  # its sweep job is one of a run's longest
        resources:
            **warm_up_job(on_gpu=lambda w: True),
        script:
            "../../scripts/compile_cache_sweep.py"

    rule sweep:
        # one job per numerics and shard: every implementation as a worker, in turns (study_a/sweep/conductor.py)
        input:
            unpack(lambda wildcards: {**sweep_interleaved_inputs(), **sweep_warm_up(wildcards)}),
        output:
            table=f"{SWEEP_DIR}/jobs/{{numerics}}-shard{{shard}}.rows.parquet",
            blocks=f"{SWEEP_DIR}/jobs/{{numerics}}-shard{{shard}}.blocks.parquet",
            profile=f"{SWEEP_DIR}/jobs/{{numerics}}-shard{{shard}}.profile.parquet",
            kernels=f"{SWEEP_DIR}/jobs/{{numerics}}-shard{{shard}}.kernels.parquet",  # the point's, if this job has it
            env=f"{SWEEP_DIR}/jobs/{{numerics}}-shard{{shard}}.env.parquet",
        wildcard_constraints:
            numerics="fp32|tf32|bf16-autocast",
            shard=r"\d+",
        log:
            "logs/study_a/sweep/{numerics}-shard{shard}.log",
        benchmark:
            f"{SWEEP_DIR}/jobs/{{numerics}}-shard{{shard}}.benchmark.tsv"
        params:
            implementations=SWEEP_JOBS,
            grid=SWEEP_GRID,
            shards=len(SWEEP_SHARDS),  # another split gives a shard other cells
            # the kernel point, whose profiled pass gives the kernel table's rows (every kernel ranked)
            kernels=(SWEEP.kernel_batch, SWEEP.kernel_resolution, SWEEP.kernel_numerics) if KERNELS_FROM_SWEEP else None,
            cache_dir=SWEEP_CACHE_DIR,  # its compile warm-up's cache, where one runs
        threads: timing_threads("sweep")
        resources:
            **timing_job("sweep"),
        priority: LONG_JOB_PRIORITY
        script:
            "../../scripts/sweep_job.py"

    SWEEP_JOB_OUTPUTS = {
        "tables": expand(f"{SWEEP_DIR}/jobs/{{numerics}}-shard{{shard}}.rows.parquet", numerics=SWEEP.numerics,
                         shard=SWEEP_SHARDS),
        "envs": expand(f"{SWEEP_DIR}/jobs/{{numerics}}-shard{{shard}}.env.parquet", numerics=SWEEP.numerics,
                       shard=SWEEP_SHARDS),
    }

    localrules: concat_sweep_blocks, concat_sweep_profile, sweep_speedups

    rule concat_sweep_blocks:
        input:
            tables=expand(f"{SWEEP_DIR}/jobs/{{numerics}}-shard{{shard}}.blocks.parquet", numerics=SWEEP.numerics,
                          shard=SWEEP_SHARDS),
        output:
            table=SUMMARIES["sweep_blocks"],
        log:
            "logs/study_a/concat-sweep-blocks.log",
        params:
            table="sweep_blocks",
        priority: SUMMARY_PRIORITY
        script:
            "../../scripts/concat_table.py"

    rule concat_sweep_profile:
        # the profiled pass of every cell (study_a.sweep.protocol.profile_calls), after its timed turns
        input:
            tables=expand(f"{SWEEP_DIR}/jobs/{{numerics}}-shard{{shard}}.profile.parquet", numerics=SWEEP.numerics,
                          shard=SWEEP_SHARDS),
        output:
            table=SUMMARIES["sweep_profile"],
        log:
            "logs/study_a/concat-sweep-profile.log",
        params:
            table="sweep_profile",
        priority: SUMMARY_PRIORITY
        script:
            "../../scripts/concat_table.py"

    rule sweep_speedups:
        input:
            sweep=TABLES["sweep"],
            blocks=SUMMARIES["sweep_blocks"],
        output:
            SUMMARIES["sweep_speedups"],
        log:
            "logs/study_a/sweep-speedups.log",
        priority: SUMMARY_PRIORITY
        script:
            "../../scripts/sweep_speedups.py"


else:

    rule sweep:
        # one job per implementation, every numerics in turn, each cell's calls back to back (study_a/sweep/serial.py)
        input:
            unpack(sweep_job_inputs),
        output:
            tables=expand(f"{SWEEP_DIR}/jobs/{{numerics}}/{{{{implementation}}}}.rows.parquet",
                          numerics=SWEEP.numerics),
            envs=expand(f"{SWEEP_DIR}/jobs/{{numerics}}/{{{{implementation}}}}.env.parquet", numerics=SWEEP.numerics),
        wildcard_constraints:
            implementation="[^/]+",
        log:
            "logs/study_a/sweep/{implementation}.log",
        benchmark:  # the job's wall time, against its tables' timed calls: benchmarks/sweep_overhead.py --from-run
            f"{SWEEP_DIR}/jobs/{{implementation}}.benchmark.tsv"
        params:
            numerics=SWEEP.numerics,
            grid=SWEEP_GRID,
        threads: timing_threads("sweep")
        resources:
            **timing_job("sweep"),
        priority: LONG_JOB_PRIORITY
        script:
            "../../scripts/sweep_job.py"

    SWEEP_JOB_OUTPUTS = {
        "tables": expand(f"{SWEEP_DIR}/jobs/{{numerics}}/{{implementation}}.rows.parquet",
                         numerics=SWEEP.numerics, implementation=SWEEP_JOBS),
        "envs": expand(f"{SWEEP_DIR}/jobs/{{numerics}}/{{implementation}}.env.parquet",
                       numerics=SWEEP.numerics, implementation=SWEEP_JOBS),
    }


rule concat_sweep:
    input:
        inputs=f"{SWEEP_DIR}/inputs",  # a missing dataset marks the rows (inputs_manifest.with_missing_inputs)
        **SWEEP_JOB_OUTPUTS,
    output:
        table=TABLES["sweep"],
        env=env_sidecar(TABLES["sweep"]),
    log:
        "logs/study_a/concat-sweep.log",
    params:
        table="sweep",
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/concat_table.py"


rule sweep_h2d:
    input:
        sweep=TABLES["sweep"],
    output:
        SUMMARIES["sweep_h2d"],
    log:
        "logs/study_a/sweep-h2d.log",
    params:
        point=(SWEEP.kernel_batch, SWEEP.kernel_resolution),
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/sweep_h2d.py"


rule sweep_kernels_job:
    input:
        unpack(sweep_job_inputs),
    output:
        table=f"{SWEEP_DIR}/kernels/{{numerics,fp32|tf32|bf16-autocast}}/{{implementation,[^/]+}}.rows.parquet",
        env=f"{SWEEP_DIR}/kernels/{{numerics}}/{{implementation}}.env.parquet",
    log:
        "logs/study_a/sweep/kernels-{numerics}-{implementation}.log",
    params:
        # the kernel point, and what a measuring job reads; not the grid, which is the sweep's
        config=reads(*MEASURED, "study_a.sweep", "study_a.cudnn",
                     but=("study_a.sweep.implementations", "study_a.sweep.numerics", "study_a.sweep.batches",
                          "study_a.sweep.resolutions", "study_a.sweep.transfers", "study_a.sweep.pool",
                          "study_a.sweep.cell_budget_s", "study_a.sweep.kernels.numerics",
                          "study_a.sweep.protocol")),
    threads: timing_threads("sweep_kernels_job")
    resources:
        **timing_job("sweep_kernels_job"),
    script:
        "../../scripts/sweep_kernels.py"


if KERNELS_FROM_SWEEP:
    KERNEL_TABLES = {
        "tables": expand(f"{SWEEP_DIR}/jobs/{{numerics}}-shard{{shard}}.kernels.parquet",
                         numerics=SWEEP.kernel_numerics, shard=SWEEP_SHARDS),
        "envs": expand(f"{SWEEP_DIR}/jobs/{{numerics}}-shard{{shard}}.env.parquet", numerics=SWEEP.kernel_numerics,
                       shard=SWEEP_SHARDS),
    }
else:
    KERNEL_TABLES = {
        "tables": expand(f"{SWEEP_DIR}/kernels/{{numerics}}/{{implementation}}.rows.parquet",
                         numerics=SWEEP.kernel_numerics, implementation=SWEEP_JOBS),
        "envs": expand(f"{SWEEP_DIR}/kernels/{{numerics}}/{{implementation}}.env.parquet",
                       numerics=SWEEP.kernel_numerics, implementation=SWEEP_JOBS),
    }


rule concat_sweep_kernels:
    input:
        inputs=f"{SWEEP_DIR}/inputs",
        **KERNEL_TABLES,
    output:
        table=TABLES["sweep_kernels"],
        env=env_sidecar(TABLES["sweep_kernels"]),
    log:
        "logs/study_a/concat-sweep-kernels.log",
    params:
        top=SWEEP.kernel_top,
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/concat_sweep_kernels.py"
