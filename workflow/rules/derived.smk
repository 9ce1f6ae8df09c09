# Tables the report draws that are computed from measured tables (src/abstraction_cost/derived/, schemas in
# tables/derived.py): precision per experiment, energy per sample, compile break-even, Study B's per-layer oracle
# curve (Fig. 5.9) and the convolution speedup predictor (Fig. 5.4). Each rule reads whole tables and measures
# nothing, so it needs no GPU and no env sidecar. The report reads them through REPORT_TABLES (common.smk).
# DERIVED (the tables' paths) and derived_inputs() are in common.smk.
localrules: precision, energy, compile_breakeven, vision_oracle_curve, conv_predictor, decomposition, roofline


rule precision:
    input:
        **derived_inputs(*(["sweep_speedups"] if "sweep_speedups" in SUMMARIES else [])),
        **derived_inputs("sweep", "backend_comparison", "backend_eval", "vision_speedups", "vision_selective_summary",
                          "vision_layer_summary", "vision_eager_baselines", "study_b_matmul_speedups",
                          "study_b_conv_ablation_speedups", "study_b_conv_blocks_speedups"),
    output:
        precision=DERIVED["precision"],
    log:
        "logs/derived/precision.log",
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/derived_tables.py"


rule energy:
    input:
        **derived_inputs("sweep", "backend_comparison", "backend_eval"),
    output:
        energy=DERIVED["energy"],
    log:
        "logs/derived/energy.log",
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/derived_tables.py"


rule compile_breakeven:
    input:
        **derived_inputs("sweep", "backend_comparison", "vision_speedups", "vision_builds", "study_b_matmul_speedups",
                          "study_b_conv_ablation_speedups", "study_b_conv_blocks_speedups"),
    output:
        compile_breakeven=DERIVED["compile_breakeven"],
    log:
        "logs/derived/compile-breakeven.log",
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/derived_tables.py"


rule vision_oracle_curve:
    input:
        **derived_inputs("vision_layer_summary"),
    output:
        vision_oracle_curve=DERIVED["vision_oracle_curve"],
    log:
        "logs/derived/vision-oracle-curve.log",
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/derived_tables.py"


rule conv_predictor:
    input:
        **derived_inputs("study_b_resnet50_conv_speedups"),
    output:
        conv_predictor=DERIVED["conv_predictor"],
        conv_predictor_summary=DERIVED["conv_predictor_summary"],
    log:
        "logs/derived/conv-predictor.log",
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/derived_tables.py"


# Per-level decomposition of the sweep's and the backend comparison's calls and of Study B's end-to-end variants
# (derived/decomposition.py): their times beside their profiled passes (sweep_profile, backend_profile: interleaved
# protocol only; vision_profile; without one, its rows are partial).
SWEEP_PROFILE = ["sweep_profile"] if "sweep_profile" in SUMMARIES else []
BACKEND_PROFILE = ["backend_profile"] if "backend_profile" in SUMMARIES else []


rule decomposition:
    input:
        **derived_inputs("sweep", *SWEEP_PROFILE, "backend_comparison", "backend_eval", *BACKEND_PROFILE,
                         "vision_e2e", "vision_profile"),
    output:
        decomposition=DERIVED["decomposition"],
    log:
        "logs/derived/decomposition.log",
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/derived_tables.py"


# Achieved TFLOP/s against the run's matmul peak (derived/roofline.py); the matmul runs in the run's numerics.
rule roofline:
    input:
        **derived_inputs("flops", "sweep", "vision_speedups", "study_b_matmul_speedups", *SWEEP_PROFILE),
    output:
        roofline=DERIVED["roofline"],
    log:
        "logs/derived/roofline.log",
    params:
        peak_numerics="tf32" if config["backend_flags"]["tf32"] else "fp32",
    priority: SUMMARY_PRIORITY
    script:
        "../../scripts/derived_tables.py"


# FLOPs per model and input for the roofline: counted on the meta device (no GPU), with an environment row of its
# own, so it is a table of TABLES like a measured one.
rule flops:
    output:
        table=TABLES["flops"],
        env=env_sidecar(TABLES["flops"]),
    log:
        "logs/derived/flops.log",
    params:
        grid=(SWEEP.batches, SWEEP.resolutions, BACKENDS["batch_size"], BACKENDS["resolution"],
              config["study_b"]["models"]["models"], config["study_b"]["models"]["batch_size"],
              config["study_b"]["models"]["resolution"]),
    script:
        "../../scripts/flops.py"
