# Study A's C++ backends and their comparison in evaluation (issue 3):
# - build_native: native/libtorch (one program, ac_libtorch, with subcommands train and eval) built with CMake
#   against the installed torch, rebuilt when a source file or the torch version changes. The build directory is
#   the repository's native/build/ (git-ignored) whatever the working directory, so runs share one build.
#   build_native_cudnn: the same for native/cudnn (ac_cudnn: ResNet-50 on cuDNN and cuBLAS, no framework).
# - train_libtorch, train_cudnn: rows of the training table beside train_eager's.
# - the comparison: one synthetic batch, the TorchScript module and the AOTInductor package made by rules, one
#   timed eval job per implementation, then compare_backends (medians, speedups, memory, parity against eager).
import torch as _torch

from abstraction_cost.backends import native as native_backend
from abstraction_cost.backends.eval_job import IMPLEMENTATIONS

NATIVE_BUILD = native_backend.BUILD_DIR
LIBTORCH_PROGRAM = str(native_backend.program_path("libtorch"))
CUDNN_PROGRAM = str(native_backend.program_path("cudnn"))
BACKENDS = config["study_a"]["backends"]
BACKENDS_DIR = "results/study_a/backends"
BACKENDS_WEIGHTS = f"results/data/init/{BACKENDS['dataset']}/{BACKENDS['init']}-seed{config['seed']}.weights"


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


rule backend_eval_input:
    output:
        directory(f"{BACKENDS_DIR}/input"),
    log:
        "logs/study_a/backends/input.log",
    params:
        shape=(BACKENDS["dataset"], BACKENDS["batch_size"], BACKENDS["resolution"]),
    script:
        "../../scripts/backend_eval_input.py"


rule script_torchscript:
    input:
        weights=BACKENDS_WEIGHTS,
    output:
        module=f"{BACKENDS_DIR}/torchscript/model.pt",
        meta=f"{BACKENDS_DIR}/torchscript/meta.json",
    log:
        "logs/study_a/backends/script-torchscript.log",
    script:
        "../../scripts/script_torchscript.py"


rule package_aoti:
    input:
        weights=BACKENDS_WEIGHTS,
    output:
        directory(f"{BACKENDS_DIR}/aoti"),
    log:
        "logs/study_a/backends/package-aoti.log",
    params:
        shape=(BACKENDS["batch_size"], BACKENDS["resolution"], config["device"], config["numerics"]),
    threads: 4  # compiling runs beside timing jobs, so it may not take every core
    resources:
        **cluster_gpu(config["device"] == "cuda"),
    script:
        "../../scripts/package_aoti.py"


def backend_eval_inputs(wildcards):
    inputs = {"input": f"{BACKENDS_DIR}/input", "weights": BACKENDS_WEIGHTS}
    if wildcards.implementation.startswith("torchscript"):
        inputs.update(module=f"{BACKENDS_DIR}/torchscript/model.pt", meta=f"{BACKENDS_DIR}/torchscript/meta.json")
    if wildcards.implementation == "aoti":
        inputs["package"] = f"{BACKENDS_DIR}/aoti"
    if wildcards.implementation in ("torchscript-cpp", "libtorch", "aoti"):
        inputs["program"] = LIBTORCH_PROGRAM
    if wildcards.implementation in ("cudnn", "cudnn-graphs"):
        inputs["program"] = CUDNN_PROGRAM
    return inputs


rule eval_backend:
    input:
        unpack(backend_eval_inputs),
    output:
        table=f"{BACKENDS_DIR}/eval/{{numerics,fp32|tf32|bf16-autocast}}/{{implementation,{'|'.join(IMPLEMENTATIONS)}}}.rows.parquet",
        env=f"{BACKENDS_DIR}/eval/{{numerics}}/{{implementation}}.env.parquet",
        logits=f"{BACKENDS_DIR}/eval/{{numerics}}/{{implementation}}.logits.f32",
    log:
        "logs/study_a/backends/eval-{numerics}-{implementation}.log",
    params:
        settings=(BACKENDS["batch_size"], BACKENDS["resolution"], config["measure"]["warmup"],
                  config["measure"]["repeats"], config["numerics"]),
    resources:
        **timing_job("eval_backend"),
    script:
        "../../scripts/eval_backend.py"


rule concat_backend_eval:
    input:
        tables=expand(f"{BACKENDS_DIR}/eval/{{numerics}}/{{implementation}}.rows.parquet",
                      numerics=BACKENDS["numerics"], implementation=BACKENDS["implementations"]),
        envs=expand(f"{BACKENDS_DIR}/eval/{{numerics}}/{{implementation}}.env.parquet",
                    numerics=BACKENDS["numerics"], implementation=BACKENDS["implementations"]),
    output:
        table="results/study_a/backend_eval.parquet",
        env=env_sidecar("results/study_a/backend_eval.parquet"),
    log:
        "logs/study_a/concat-backend-eval.log",
    params:
        table="backend_eval",
    script:
        "../../scripts/concat_table.py"


rule compare_backends:
    input:
        table="results/study_a/backend_eval.parquet",
        env=env_sidecar("results/study_a/backend_eval.parquet"),
        logits=expand(f"{BACKENDS_DIR}/eval/{{numerics}}/{{implementation}}.logits.f32",
                      numerics=BACKENDS["numerics"], implementation=BACKENDS["implementations"]),
    output:
        table="results/study_a/backend_comparison.parquet",
        env=env_sidecar("results/study_a/backend_comparison.parquet"),
    log:
        "logs/study_a/compare-backends.log",
    params:
        implementations=BACKENDS["implementations"],
        numerics=BACKENDS["numerics"],
        tolerance=BACKENDS["logit_tolerance"],
    script:
        "../../scripts/compare_backends.py"


TABLES["backend_eval"] = "results/study_a/backend_eval.parquet"
TABLES["backend_comparison"] = "results/study_a/backend_comparison.parquet"
