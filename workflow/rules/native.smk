# Study A's C++ programs and their training jobs (issue 3):
# - build_native: native/libtorch (one program, ac_libtorch, with subcommands train and eval) built with CMake
#   against the installed torch, rebuilt when a source file or the torch version changes. The build directory is
#   the repository's native/build/ (git-ignored) whatever the working directory, so runs share one build.
#   build_native_cudnn: the same for native/cudnn (ac_cudnn: ResNet-50 on cuDNN and cuBLAS, no framework).
# - train_libtorch, train_cudnn: rows of the training table beside train_eager's.
# The backend comparison in evaluation that also runs these programs is study_a_backends.smk.
import torch as _torch

from abstraction_cost.backends import native as native_backend

NATIVE_BUILD = native_backend.BUILD_DIR
LIBTORCH_PROGRAM = str(native_backend.program_path("libtorch"))
CUDNN_PROGRAM = str(native_backend.program_path("cudnn"))


rule build_native:
    input:
        [str(p) for p in native_backend.sources("libtorch")],
    output:
        LIBTORCH_PROGRAM,
    log:
        "logs/native/build-libtorch.log",
    params:
        program="libtorch",
        build_dir=str(NATIVE_BUILD),
        torch_version=_torch.__version__,  # a different torch means a rebuild (params are a rerun trigger)
    threads: 4  # four translation units; capped at --cores
    script:
        "../../scripts/build_native.py"


rule build_native_cudnn:
    input:
        [str(p) for p in native_backend.sources("cudnn")],
    output:
        CUDNN_PROGRAM,
    log:
        "logs/native/build-cudnn.log",
    params:
        program="cudnn",
        build_dir=str(NATIVE_BUILD),
        torch_version=_torch.__version__,  # the cuDNN and cuBLAS wheels come with torch
    threads: 4
    script:
        "../../scripts/build_native.py"


rule train_libtorch:
    input:
        data="results/data/prepared/{dataset}",
        weights="results/data/init/{dataset}/{init}-seed{seed}.weights",
        order=f"results/data/order/{{dataset}}/seed{{seed}}-epochs{TRAINING['epochs']}.i32",
        program=LIBTORCH_PROGRAM,
    output:
        table="results/study_a/train/libtorch/{dataset}/{init}/seed{seed}.rows.parquet",
        env="results/study_a/train/libtorch/{dataset}/{init}/seed{seed}.env.parquet",
    log:
        "logs/study_a/train-libtorch-{dataset}-{init}-{seed}.log",
    resources:
        **timing_job("train_libtorch"),
    script:
        "../../scripts/train_libtorch.py"


rule train_cudnn:
    input:
        data="results/data/prepared/{dataset}",
        weights="results/data/init/{dataset}/{init}-seed{seed}.weights",
        order=f"results/data/order/{{dataset}}/seed{{seed}}-epochs{TRAINING['epochs']}.i32",
        program=CUDNN_PROGRAM,
    output:
        table="results/study_a/train/cudnn/{dataset}/{init}/seed{seed}.rows.parquet",
        env="results/study_a/train/cudnn/{dataset}/{init}/seed{seed}.env.parquet",
    log:
        "logs/study_a/train-cudnn-{dataset}-{init}-{seed}.log",
    resources:
        **timing_job("train_cudnn"),
    script:
        "../../scripts/train_cudnn.py"
