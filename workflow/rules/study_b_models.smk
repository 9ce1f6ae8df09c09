# Study B, vision models (Goldfarb 2024, sec. 5.5): end to end, timing methods, per-layer times, oracles and
# selective compilation, per (model, pair); pair cpu = interp/cpp, gpu = cuda/triton. Config: study_b.models.
VISION = config["study_b"]["models"]
VISION_DIR = "results/study_b/models"


wildcard_constraints:
    model="|".join(["alexnet", "resnet50", "mobilenet_v2", "googlenet", "squeezenet1_1", "densenet121"]),
    pair="cpu|gpu",
    mode="default|reduce-overhead|max-autotune|max-autotune-no-cudagraphs",


def vision_cases():
    return [(model, pair) for pair, models in VISION["models"].items() for model in models]


def vision_parts(step, kind, modes=None):
    if modes is None:
        return [f"{VISION_DIR}/{step}/{pair}/{model}.{kind}.parquet" for model, pair in vision_cases()]
    return [f"{VISION_DIR}/{step}/{pair}/{mode}/{model}.{kind}.parquet"
            for model, pair in vision_cases() for mode in modes]


rule vision_e2e:
    output:
        table=f"{VISION_DIR}/e2e/{{pair}}/{{mode}}/{{model}}.rows.parquet",
        builds=f"{VISION_DIR}/e2e/{{pair}}/{{mode}}/{{model}}.builds.parquet",
        env=f"{VISION_DIR}/e2e/{{pair}}/{{mode}}/{{model}}.env.parquet",
    log:
        "logs/study_b/models/e2e-{pair}-{mode}-{model}.log",
    resources:
        timing=1,
    script:
        "../../scripts/vision_e2e.py"


rule vision_timing_methods:
    output:
        table=f"{VISION_DIR}/timing/{{pair}}/{{model}}.rows.parquet",
        env=f"{VISION_DIR}/timing/{{pair}}/{{model}}.env.parquet",
    log:
        "logs/study_b/models/timing-{pair}-{model}.log",
    resources:
        timing=1,
    script:
        "../../scripts/vision_timing_methods.py"


rule vision_layers:
    output:
        table=f"{VISION_DIR}/layers/{{pair}}/{{model}}.rows.parquet",
        env=f"{VISION_DIR}/layers/{{pair}}/{{model}}.env.parquet",
    log:
        "logs/study_b/models/layers-{pair}-{model}.log",
    resources:
        timing=1,
    script:
        "../../scripts/vision_layers.py"


rule vision_oracles:
    input:
        layers=f"{VISION_DIR}/layers/{{pair}}/{{model}}.rows.parquet",
    output:
        table=f"{VISION_DIR}/oracles/{{pair}}/{{model}}.rows.parquet",
    log:
        "logs/study_b/models/oracles-{pair}-{model}.log",
    script:
        "../../scripts/vision_oracles.py"


rule vision_selective:
    input:
        oracles=f"{VISION_DIR}/oracles/{{pair}}/{{model}}.rows.parquet",
    output:
        table=f"{VISION_DIR}/selective/{{pair}}/{{model}}.rows.parquet",
        builds=f"{VISION_DIR}/selective/{{pair}}/{{model}}.builds.parquet",
        env=f"{VISION_DIR}/selective/{{pair}}/{{model}}.env.parquet",
    log:
        "logs/study_b/models/selective-{pair}-{model}.log",
    resources:
        timing=1,
    script:
        "../../scripts/vision_selective.py"


# Whole tables: per-job parts joined with their jobs' environment rows (scripts/concat_table.py).
VISION_TABLES = {
    "vision_e2e": (vision_parts("e2e", "rows", VISION["modes"]), vision_parts("e2e", "env", VISION["modes"])),
    "vision_builds": (vision_parts("e2e", "builds", VISION["modes"]) + vision_parts("selective", "builds"),
                      vision_parts("e2e", "env", VISION["modes"]) + vision_parts("selective", "env")),
    "vision_timing_methods": (vision_parts("timing", "rows"), vision_parts("timing", "env")),
    "vision_layer_times": (vision_parts("layers", "rows"), vision_parts("layers", "env")),
    # computed per (model, pair) from that job's layer rows: their environment is the layer job's
    "vision_oracles": (vision_parts("oracles", "rows"), vision_parts("layers", "env")),
    "vision_selective": (vision_parts("selective", "rows"), vision_parts("selective", "env")),
}
for _name in VISION_TABLES:
    TABLES[_name] = f"{VISION_DIR}/{_name}.parquet"


rule concat_vision_table:
    input:
        tables=lambda w: VISION_TABLES[w.vision_table][0],
        envs=lambda w: VISION_TABLES[w.vision_table][1],
    output:
        table=f"{VISION_DIR}/{{vision_table}}.parquet",
        env=f"{VISION_DIR}/{{vision_table}}.env.parquet",
    log:
        "logs/study_b/models/concat-{vision_table}.log",
    params:
        table=lambda w: w.vision_table,
    wildcard_constraints:
        vision_table="|".join(VISION_TABLES),
    script:
        "../../scripts/concat_table.py"


VISION_SUMMARIES = ["vision_speedups", "vision_timing_summary", "vision_layer_summary", "vision_selective_summary"]


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
        **{name: f"{VISION_DIR}/{name}.parquet" for name in VISION_SUMMARIES},
        **{f"{name}_env": env_sidecar(f"{VISION_DIR}/{name}.parquet") for name in VISION_SUMMARIES},
    log:
        "logs/study_b/models/summaries.log",
    script:
        "../../scripts/vision_summaries.py"


for _name in VISION_SUMMARIES:
    TABLES[_name] = f"{VISION_DIR}/{_name}.parquet"


rule vision_models:
    input:
        [TABLES[name] for name in [*VISION_TABLES, *VISION_SUMMARIES]],
