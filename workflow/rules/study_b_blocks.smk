# Study B building blocks (Goldfarb 2024, Fig. 5.1, 5.3, 5.4, 5.5): matmul, convolution ablation, ResNet-50's
# convolutions (isolated and inside the model) and convolution blocks, eager against torch.compile.
# One timing job per experiment × device pair (cpu: interp vs cpp, gpu: cuda vs triton) × compile mode.
from abstraction_cost.study_b.configurations import COMPILE_MODES as _COMPILE_MODES

# wildcard patterns, written into every output of a rule (an inline constraint binds only where it is written)
MODE_PATTERN = "|".join(_COMPILE_MODES)
EXPERIMENT_PATTERN = "|".join(BLOCK_EXPERIMENTS)
SPEEDUP_PATTERN = "|".join(n for n, e in BLOCK_EXPERIMENTS.items() if e.speedup_table)


# seconds: run where Snakemake runs, not as cluster jobs
localrules: concat_study_b_blocks, study_b_block_speedups, study_b_resnet50_conv_speedups, study_b_blocks


rule study_b_block_timing:
    input:
        cache=block_warm_up,
    output:
        table=f"{BLOCK_DIR}/{{experiment,{EXPERIMENT_PATTERN}}}/{{pair,cpu|gpu}}-{{mode,{MODE_PATTERN}}}.rows.parquet",
        env=f"{BLOCK_DIR}/{{experiment,{EXPERIMENT_PATTERN}}}/{{pair,cpu|gpu}}-{{mode,{MODE_PATTERN}}}.env.parquet",
    log:
        "logs/study_b/blocks/{experiment}-{pair}-{mode}.log",
    params:
        cache_dir=STUDY_B_CACHE_DIR,
        config=lambda w: block_config(w.experiment),
    threads: timing_threads("study_b_block_timing")
    resources:
        **timing_job("study_b_block_timing"),
    script:
        "../../scripts/study_b_block_timing.py"


rule concat_study_b_blocks:
    input:
        tables=lambda w: block_parts(w.experiment, "rows"),
        envs=lambda w: block_parts(w.experiment, "env"),
    output:
        table=f"{BLOCK_DIR}/{{experiment,{EXPERIMENT_PATTERN}}}.parquet",
        env=f"{BLOCK_DIR}/{{experiment,{EXPERIMENT_PATTERN}}}.env.parquet",
    log:
        "logs/study_b/blocks/concat-{experiment}.log",
    params:
        table=lambda w: BLOCK_EXPERIMENTS[w.experiment].table,
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/concat_table.py"


rule study_b_block_speedups:
    input:
        table=f"{BLOCK_DIR}/{{experiment}}.parquet",
        envs=[f"{BLOCK_DIR}/{{experiment}}.env.parquet"],
    output:
        table=f"{BLOCK_DIR}/{{experiment,{SPEEDUP_PATTERN}}}.speedups.parquet",
        env=f"{BLOCK_DIR}/{{experiment,{SPEEDUP_PATTERN}}}.speedups.env.parquet",
    log:
        "logs/study_b/blocks/speedups-{experiment}.log",
    params:
        experiment=lambda w: w.experiment,
        config=reads("seed", "study_b.blocks.bootstrap"),
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/study_b_block_speedups.py"


rule study_b_resnet50_conv_speedups:
    input:
        isolated=f"{BLOCK_DIR}/resnet50_convs.parquet",
        in_model=f"{BLOCK_DIR}/resnet50_in_model.parquet",
        envs=[f"{BLOCK_DIR}/resnet50_convs.env.parquet", f"{BLOCK_DIR}/resnet50_in_model.env.parquet"],
    output:
        table=f"{BLOCK_DIR}/resnet50_convs.speedups.parquet",
        env=f"{BLOCK_DIR}/resnet50_convs.speedups.env.parquet",
    log:
        "logs/study_b/blocks/speedups-resnet50_convs.log",
    params:
        experiment="resnet50_convs",
        config=reads("seed", "study_b.blocks.bootstrap"),
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/study_b_block_speedups.py"


# Target: every building-block table (`snakemake study_b_blocks`).
rule study_b_blocks:
    input:
        [TABLES[exp.table] for exp in BLOCK_EXPERIMENTS.values()],
        [TABLES[exp.speedup_table] for exp in BLOCK_EXPERIMENTS.values() if exp.speedup_table],
        TABLES["study_b_resnet50_conv_speedups"],
