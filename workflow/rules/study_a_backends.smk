# Study A's backend comparison in evaluation: one synthetic batch, the TorchScript module and the AOTInductor
# package made by rules, one timed eval job per numerics of study_a.backends.numerics that measures every
# implementation (interleaved: long-lived workers taking turns over invocations, docs/measurement.md;
# study_a/comparison/interleaved.py), then compare_backends (medians, paired speedups, memory, parity against eager in
# each numerics). The C++ programs it runs are built by native.smk.
# jobs of seconds: run where Snakemake runs
localrules: backend_eval_input, concat_backend_eval, concat_backend_profile, compare_backends


rule backend_eval_input:
    output:
        directory(f"{BACKENDS_DIR}/input"),
    log:
        "logs/study_a/backends/input.log",
    params:
        shape=(BACKENDS["dataset"], BACKENDS["batch_size"], BACKENDS["resolution"]),
    priority: INPUT_PRIORITY
    script:
        "../../scripts/backend_eval_input.py"


rule script_torchscript:
    input:
        weights=BACKENDS_WEIGHTS,
    output:
        module=TORCHSCRIPT_MODULE,
        meta=TORCHSCRIPT_META,
    log:
        "logs/study_a/backends/script-torchscript.log",
    priority: INPUT_PRIORITY
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
        shape=(BACKENDS["batch_size"], BACKENDS["resolution"], config["device"], config["backend_flags"]),
    threads: 4  # compiling runs beside timing jobs, so it may not take every core
    resources:
        **cluster_gpu(DEVICE == "cuda"),
    priority: INPUT_PRIORITY
    script:
        "../../scripts/package_aoti.py"


rule eval_backend:
    input:
        unpack(backend_eval_inputs),
    output:
        tables=expand(f"{BACKENDS_DIR}/eval/{{{{numerics}}}}/{{implementation}}.rows.parquet",
                      implementation=BACKENDS["implementations"]),
        logits=expand(f"{BACKENDS_DIR}/eval/{{{{numerics}}}}/{{implementation}}.logits.f32",
                      implementation=BACKENDS["implementations"]),
        env=f"{BACKENDS_DIR}/eval/{{numerics}}.env.parquet",
        **({"profile": f"{BACKENDS_DIR}/eval/{{numerics}}.profile.parquet"} if "backend_profile" in SUMMARIES else {}),
    wildcard_constraints:
        numerics="|".join(BACKENDS["numerics"]),
    log:
        "logs/study_a/backends/eval-{numerics}.log",
    benchmark:  # the job's wall time, start-up included: benchmarks/run_time.py
        f"{BACKENDS_DIR}/eval/{{numerics}}.benchmark.tsv"
    params:
        implementations=BACKENDS["implementations"],
        config=reads(*MEASURED, "study_a.backends", "study_a.cudnn",
                     but=("study_a.backends.numerics", "study_a.backends.logit_tolerance")),
    threads: timing_threads("eval_backend")
    resources:
        **timing_job("eval_backend"),
    script:
        "../../scripts/eval_backend.py"


rule concat_backend_eval:
    input:
        tables=expand(f"{BACKENDS_DIR}/eval/{{numerics}}/{{implementation}}.rows.parquet",
                      numerics=BACKENDS["numerics"], implementation=BACKENDS["implementations"]),
        envs=expand(f"{BACKENDS_DIR}/eval/{{numerics}}.env.parquet", numerics=BACKENDS["numerics"]),
    output:
        table=TABLES["backend_eval"],
        env=env_sidecar(TABLES["backend_eval"]),
    log:
        "logs/study_a/concat-backend-eval.log",
    params:
        table="backend_eval",
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/concat_table.py"


if "backend_profile" in SUMMARIES:  # interleaved: every implementation's profiled pass

    rule concat_backend_profile:
        # study_a.backends.protocol.profile_calls calls of each implementation, after its timed turns
        input:
            tables=expand(f"{BACKENDS_DIR}/eval/{{numerics}}.profile.parquet", numerics=BACKENDS["numerics"]),
        output:
            table=SUMMARIES["backend_profile"],
        log:
            "logs/study_a/concat-backend-profile.log",
        params:
            table="backend_profile",
        priority: SUMMARY_PRIORITY
        script:
            "../../scripts/concat_table.py"


rule compare_backends:
    input:
        table=TABLES["backend_eval"],
        env=env_sidecar(TABLES["backend_eval"]),
        logits=expand(f"{BACKENDS_DIR}/eval/{{numerics}}/{{implementation}}.logits.f32",
                      numerics=BACKENDS["numerics"], implementation=BACKENDS["implementations"]),
    output:
        table=TABLES["backend_comparison"],
        env=env_sidecar(TABLES["backend_comparison"]),
    log:
        "logs/study_a/compare-backends.log",
    params:
        implementations=BACKENDS["implementations"],
        numerics=BACKENDS["numerics"],
        tolerance=BACKENDS["logit_tolerance"],
        seed=config["seed"],
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/compare_backends.py"
