# Study A's backend comparison in evaluation: one synthetic batch, the TorchScript module and the AOTInductor
# package made by rules, one timed eval job per implementation that measures every numerics of
# study_a.backends.numerics in turn (start-up paid once per implementation; backends/eval_job.py), then
# compare_backends (medians, speedups, memory, parity against eager in each numerics). The C++ programs it runs
# are built by native.smk.
from abstraction_cost.backends.eval_job import IMPLEMENTATIONS

BACKENDS = config["study_a"]["backends"]
BACKENDS_DIR = "results/study_a/backends"
BACKENDS_WEIGHTS = f"results/data/init/{BACKENDS['dataset']}/{BACKENDS['init']}-seed{config['seed']}.weights"


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
        tables=expand(f"{BACKENDS_DIR}/eval/{{numerics}}/{{{{implementation}}}}.rows.parquet",
                      numerics=BACKENDS["numerics"]),
        envs=expand(f"{BACKENDS_DIR}/eval/{{numerics}}/{{{{implementation}}}}.env.parquet",
                    numerics=BACKENDS["numerics"]),
        logits=expand(f"{BACKENDS_DIR}/eval/{{numerics}}/{{{{implementation}}}}.logits.f32",
                      numerics=BACKENDS["numerics"]),
    wildcard_constraints:
        implementation="|".join(IMPLEMENTATIONS),
    log:
        "logs/study_a/backends/eval-{implementation}.log",
    benchmark:  # the job's wall time, start-up included: benchmarks/run_time.py
        f"{BACKENDS_DIR}/eval/{{implementation}}.benchmark.tsv"
    params:
        numerics=BACKENDS["numerics"],
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
