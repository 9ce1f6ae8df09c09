# Study A's inference sweep (issue 10; study Fig. 8-14 and its profiler section): every implementation of
# study_a.sweep.implementations over batch × resolution × input transfer mode, in every numerics of
# study_a.sweep.numerics, on the prepared test images of study_a.backends.dataset with the same init weights as
# the backend comparison.
# - sweep_inputs: `pool` test images resized once per resolution (backends/transfer.py)
# - package_aoti_sweep: one AOTInductor package with dynamic batch and resolution (backends/aoti_dynamic.py)
# - sweep: one process per implementation walks every cell of resolution × batch × transfer mode in each
#   numerics in turn (backends/sweep.py; start-up paid once), the numerics set before its model is built (TF32
#   flags in Python, --tf32 for the C++ programs); one table per (numerics, implementation); concat_sweep
# - sweep_h2d: the host-to-device copy at the study's point beside the study's numbers
# - sweep_kernels: top kernels per (numerics of kernels.numerics, implementation) at the kernel point
#   (torch.profiler; the C++ programs under Nsight Compute, backends/ncu.py), with the study's ReLU rows
# The AOTInductor package is one for every numerics, as the backend comparison's: its convolutions and matmuls
# are ATen calls that follow the flags ac_libtorch sets from --tf32.
from abstraction_cost.backends.sweep_cells import SweepSettings as _SweepSettings
from abstraction_cost.backends.sweep_conductor import Protocol as _Protocol

SWEEP = _SweepSettings.from_config(config)  # refuses a bad grid, transfer or implementation, naming the key
SWEEP_PROTOCOL = _Protocol.from_config(config["study_a"]["sweep"])
SWEEP_DIR = "results/study_a/sweep"
SWEEP_JOBS = SWEEP.jobs()
SWEEP_SUMMARIES = {"sweep_h2d": "results/study_a/sweep_h2d.parquet"}


rule sweep_inputs:
    input:
        data=f"results/data/prepared/{BACKENDS['dataset']}",
    output:
        directory(f"{SWEEP_DIR}/inputs"),
    log:
        "logs/study_a/sweep/inputs.log",
    params:
        grid=(SWEEP.pool, SWEEP.resolutions),
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
        grid=(SWEEP.batches, SWEEP.resolutions, config["device"], config["numerics"]),
    threads: 4  # compiling runs beside timing jobs, so it may not take every core
    resources:
        **cluster_gpu(config["device"] == "cuda"),
    script:
        "../../scripts/package_aoti_sweep.py"


def sweep_inputs_of(implementation):
    inputs = {"inputs": f"{SWEEP_DIR}/inputs", "weights": BACKENDS_WEIGHTS}
    if implementation.startswith("torchscript"):
        inputs["module"] = f"{BACKENDS_DIR}/torchscript/model.pt"
    if implementation == "aoti":
        inputs["package"] = f"{SWEEP_DIR}/aoti"
    if implementation in ("torchscript-cpp", "libtorch", "aoti"):
        inputs["program"] = LIBTORCH_PROGRAM
    if implementation in ("cudnn", "cudnn-graphs"):
        inputs["program"] = CUDNN_PROGRAM
    return inputs


def sweep_job_inputs(wildcards):
    return sweep_inputs_of(wildcards.implementation)


def sweep_interleaved_inputs():
    """Every implementation's inputs; the programs as program_libtorch and program_cudnn."""
    inputs = {}
    for impl in SWEEP_JOBS:
        for key, path in sweep_inputs_of(impl).items():
            inputs[f"program_{Path(path).parent.name}" if key == "program" else key] = path
    return inputs


SWEEP_GRID = (SWEEP.batches, SWEEP.resolutions, SWEEP.transfers, SWEEP.warmup, SWEEP.repeats, SWEEP.cell_budget_s,
              SWEEP.compile_shapes, config["numerics"], config["study_a"]["sweep"].get("protocol"))

if SWEEP_PROTOCOL.mode == "interleaved":

    rule sweep:
        # one job per numerics: every implementation as a worker, in turns (backends/sweep_conductor.py)
        input:
            unpack(lambda wildcards: sweep_interleaved_inputs()),
        output:
            table=f"{SWEEP_DIR}/jobs/{{numerics}}.rows.parquet",
            blocks=f"{SWEEP_DIR}/jobs/{{numerics}}.blocks.parquet",
            env=f"{SWEEP_DIR}/jobs/{{numerics}}.env.parquet",
        wildcard_constraints:
            numerics="fp32|tf32|bf16-autocast",
        log:
            "logs/study_a/sweep/{numerics}.log",
        benchmark:
            f"{SWEEP_DIR}/jobs/{{numerics}}.benchmark.tsv"
        params:
            implementations=SWEEP_JOBS,
            grid=SWEEP_GRID,
        resources:
            **timing_job("sweep"),
        script:
            "../../scripts/sweep_job.py"

    SWEEP_JOB_OUTPUTS = {
        "tables": expand(f"{SWEEP_DIR}/jobs/{{numerics}}.rows.parquet", numerics=SWEEP.numerics),
        "envs": expand(f"{SWEEP_DIR}/jobs/{{numerics}}.env.parquet", numerics=SWEEP.numerics),
    }

    rule concat_sweep_blocks:
        input:
            tables=expand(f"{SWEEP_DIR}/jobs/{{numerics}}.blocks.parquet", numerics=SWEEP.numerics),
        output:
            table="results/study_a/sweep_blocks.parquet",
        log:
            "logs/study_a/concat-sweep-blocks.log",
        params:
            table="sweep_blocks",
        script:
            "../../scripts/concat_table.py"

    rule sweep_speedups:
        input:
            sweep="results/study_a/sweep.parquet",
            blocks="results/study_a/sweep_blocks.parquet",
        output:
            "results/study_a/sweep_speedups.parquet",
        log:
            "logs/study_a/sweep-speedups.log",
        script:
            "../../scripts/sweep_speedups.py"

    SWEEP_SUMMARIES["sweep_blocks"] = "results/study_a/sweep_blocks.parquet"  # run_ids: the sweep's
    SWEEP_SUMMARIES["sweep_speedups"] = "results/study_a/sweep_speedups.parquet"

else:

    rule sweep:
        # one job per implementation, every numerics in turn, each cell's calls back to back (backends/sweep.py)
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
        resources:
            **timing_job("sweep"),
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
        inputs=f"{SWEEP_DIR}/inputs",  # a missing dataset marks the rows (transfer.with_missing_inputs)
        **SWEEP_JOB_OUTPUTS,
    output:
        table="results/study_a/sweep.parquet",
        env=env_sidecar("results/study_a/sweep.parquet"),
    log:
        "logs/study_a/concat-sweep.log",
    params:
        table="sweep",
    script:
        "../../scripts/concat_table.py"


rule sweep_h2d:
    input:
        sweep="results/study_a/sweep.parquet",
    output:
        SWEEP_SUMMARIES["sweep_h2d"],
    log:
        "logs/study_a/sweep-h2d.log",
    params:
        point=(SWEEP.kernel_batch, SWEEP.kernel_resolution),
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
        point=(SWEEP.kernel_batch, SWEEP.kernel_resolution, SWEEP.kernel_top, SWEEP.compile_shapes,
               config["numerics"]),
    resources:
        **timing_job("sweep_kernels_job"),
    script:
        "../../scripts/sweep_kernels.py"


rule concat_sweep_kernels:
    input:
        inputs=f"{SWEEP_DIR}/inputs",
        tables=expand(f"{SWEEP_DIR}/kernels/{{numerics}}/{{implementation}}.rows.parquet",
                      numerics=SWEEP.kernel_numerics, implementation=SWEEP_JOBS),
        envs=expand(f"{SWEEP_DIR}/kernels/{{numerics}}/{{implementation}}.env.parquet",
                    numerics=SWEEP.kernel_numerics, implementation=SWEEP_JOBS),
    output:
        table="results/study_a/sweep_kernels.parquet",
        env=env_sidecar("results/study_a/sweep_kernels.parquet"),
    log:
        "logs/study_a/concat-sweep-kernels.log",
    script:
        "../../scripts/concat_sweep_kernels.py"


TABLES["sweep"] = "results/study_a/sweep.parquet"
TABLES["sweep_kernels"] = "results/study_a/sweep_kernels.parquet"
