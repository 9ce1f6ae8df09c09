# Study A's C++ programs and their training jobs (issue 3):
# - build_native: native/libtorch (one program, ac_libtorch, with subcommands train and eval) built with CMake
#   against the installed torch, rebuilt when a source file or the torch version changes. The build directory is
#   the repository's native/build/ (git-ignored) whatever the working directory, so runs share one build.
#   build_native_cudnn: the same for native/cudnn (ac_cudnn: ResNet-50 on cuDNN and cuBLAS, no framework).
# - train_libtorch, train_cudnn: rows of the training table beside train_eager's.
# The backend comparison in evaluation that also runs these programs is study_a_backends.smk.

rule build_native:
    input:
        NATIVE_SOURCES["libtorch"],
    output:
        LIBTORCH_PROGRAM,
    log:
        "logs/native/build-libtorch.log",
    params:
        program="libtorch",
        build_dir=lambda w, output: str(Path(output[0]).parents[1]),  # native/build/<project>/<program>
        torch_version=TORCH_VERSION,  # a different torch means a rebuild (params are a rerun trigger)
    threads: 4  # four translation units; capped at --cores
    priority: INPUT_PRIORITY
    script:
        "../../scripts/build_native.py"


rule build_native_cudnn:
    input:
        NATIVE_SOURCES["cudnn"],
    output:
        CUDNN_PROGRAM,
    log:
        "logs/native/build-cudnn.log",
    params:
        program="cudnn",
        build_dir=lambda w, output: str(Path(output[0]).parents[1]),
        torch_version=TORCH_VERSION,  # the cuDNN and cuBLAS wheels come with torch
    threads: 4
    priority: INPUT_PRIORITY
    script:
        "../../scripts/build_native.py"


rule train_libtorch:
    input:
        data=PREPARED,
        weights=INIT_WEIGHTS,
        order=TRAINING_ORDER,
        program=LIBTORCH_PROGRAM,
    output:
        table="results/study_a/train/libtorch/{dataset}/{init}/seed{seed}.rows.parquet",
        env="results/study_a/train/libtorch/{dataset}/{init}/seed{seed}.env.parquet",
    log:
        "logs/study_a/train-libtorch-{dataset}-{init}-{seed}.log",
    params:
        config=reads(*MEASURED, "study_a.training", but=("study_a.training.backends", "study_a.training.datasets", "study_a.training.inits", "study_a.training.repeats")),
    threads: timing_threads("train_libtorch")
    resources:
        **timing_job("train_libtorch"),
    script:
        "../../scripts/train_libtorch.py"


rule train_cudnn:
    input:
        data=PREPARED,
        weights=INIT_WEIGHTS,
        order=TRAINING_ORDER,
        program=CUDNN_PROGRAM,
    output:
        table="results/study_a/train/cudnn/{dataset}/{init}/seed{seed}.rows.parquet",
        env="results/study_a/train/cudnn/{dataset}/{init}/seed{seed}.env.parquet",
    log:
        "logs/study_a/train-cudnn-{dataset}-{init}-{seed}.log",
    params:
        config=reads(*MEASURED, "study_a.training", "study_a.cudnn", but=("study_a.training.backends", "study_a.training.datasets", "study_a.training.inits", "study_a.training.repeats")),
    threads: timing_threads("train_cudnn")
    resources:
        **timing_job("train_cudnn"),
    script:
        "../../scripts/train_cudnn.py"
