# Study B, vision models (Goldfarb 2024, sec. 5.5): end to end, timing methods, per-layer times, oracles and
# selective compilation, all in one job per (model, pair) (study_b/models/job.py); pair cpu = interp/cpp,
# gpu = cuda/triton. Config: study_b.models. Every table of VISION_JOB_TABLES (tables/study_b_models.JOB_TABLES) is
# a part per job and a whole table by concat_vision_table: vision_profile (each end-to-end variant's profiled pass,
# study_b.models.protocol.profile_calls) among them, read by rule decomposition.
VISION_JOB_DIR = f"{VISION_DIR}/jobs/{{pair}}/{{model}}"


localrules: concat_vision_table, vision_summaries, vision_models  # seconds: run where Snakemake runs


rule vision_model:
    input:
        cache=vision_warm_up,
    output:
        **{name: f"{VISION_JOB_DIR}/{name}.parquet" for name in VISION_JOB_TABLES},
        env=f"{VISION_JOB_DIR}/environment.parquet",
    log:
        "logs/study_b/models/{pair}-{model}.log",
    params:
        cache_dir=STUDY_B_CACHE_DIR,
        config=VISION_CONFIG,
    threads: timing_threads("vision_model")
    resources:
        **timing_job("vision_model"),
    priority: LONG_JOB_PRIORITY
    script:
        "../../scripts/vision_model.py"


# Whole tables: per-job parts joined with their jobs' environment rows (scripts/concat_table.py).
rule concat_vision_table:
    input:
        unpack(lambda w: vision_parts(w.vision_table)),
    output:
        table=f"{VISION_DIR}/{{vision_table}}.parquet",
        env=f"{VISION_DIR}/{{vision_table}}.env.parquet",
    log:
        "logs/study_b/models/concat-{vision_table}.log",
    params:
        table=lambda w: w.vision_table,
    wildcard_constraints:
        vision_table="|".join(VISION_JOB_TABLES),
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/concat_table.py"


rule vision_summaries:
    input:
        e2e=TABLES["vision_e2e"],
        e2e_env=env_sidecar(TABLES["vision_e2e"]),
        timing=TABLES["vision_timing_methods"],
        timing_env=env_sidecar(TABLES["vision_timing_methods"]),
        layers=TABLES["vision_layer_times"],
        layers_env=env_sidecar(TABLES["vision_layer_times"]),
        oracles=TABLES["vision_oracles"],
        selective=TABLES["vision_selective"],
        selective_env=env_sidecar(TABLES["vision_selective"]),
    output:
        **{name: TABLES[name] for name in VISION_SUMMARIES},
        **{f"{name}_env": env_sidecar(TABLES[name]) for name in VISION_SUMMARIES},
    log:
        "logs/study_b/models/summaries.log",
    params:
        config=reads("seed", "study_b.models.bootstrap"),
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/vision_summaries.py"


rule vision_models:
    input:
        [TABLES[name] for name in [*VISION_JOB_TABLES, *VISION_SUMMARIES]],
