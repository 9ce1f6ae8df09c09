# What abstraction costs in the PyTorch ecosystem: Study A (Levental & Orlova 2021) and Study B (Goldfarb 2024).
# Run:  snakemake --cores all            (profiles/default is picked up through workflow-profile)
# Scale is config: config/smoke.yaml (CI), config/gpu-smoke.yaml, config/config.yaml (default), config/paper.yaml.
# The default config is found beside this file, so `-s PATH/Snakefile` and `-d DIR` work from any directory;
# results/, logs/ and data.root are relative to the working directory.
configfile: f"{workflow.basedir}/config/config.yaml"


# common.smk first: it defines every shared name (paths, TABLES, input functions, gpu_slots.smk's resources); the
# rules files below use only it and their own names, so their order does not matter.
include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/study_a.smk"
include: "workflow/rules/study_b_compile_cache.smk"
include: "workflow/rules/study_b_models.smk"
include: "workflow/rules/study_b_blocks.smk"
include: "workflow/rules/native.smk"
include: "workflow/rules/study_a_backends.smk"
include: "workflow/rules/study_a_sweep.smk"
include: "workflow/rules/derived.smk"
include: "workflow/rules/report.smk"


localrules: all


rule all:
    input:
        "results/report.html",
    default_target: True


# Every rule runs in the project's one environment (envs/environment.yaml: the pins of envs/requirements.txt).
for _rule in workflow.rules:
    _rule.conda_env = _rule.conda_env or SOFTWARE
