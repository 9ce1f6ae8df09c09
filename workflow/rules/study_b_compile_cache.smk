# Study B's compile cache (study_b/compile_cache.py): before a Study B timing job times anything, its own warm-up
# job compiles every graph it will compile, in parallel processes, into the pipeline's Inductor cache; the timing
# job then compiles warm from it. One warm-up per timing job, with that job's config as params, so a config change
# reruns the warm-ups and timing jobs of what it changes and no other, and only a job's own warm-up delays it.
# The warm-ups take no timing slot and few threads: they run beside Study A's timing jobs on the cores those do
# not use, though never beside a job that times on the CPU (resource `compile`, gpu_slots.smk); one that autotunes
# (max-autotune on the GPU) holds a GPU's slot lock while it compiles (gpu_slots.gpu_held). Skipped with
# study_b.fresh_compile_cache (every job compiles cold into an empty cache of its own).


rule compile_cache_blocks:
    output:
        manifest=f"{STUDY_B_WARM_UPS}/blocks/{{experiment}}/{{pair}}-{{mode}}.json",
    log:
        "logs/study_b/compile-cache/blocks-{experiment}-{pair}-{mode}.log",
    params:
        cache_dir=STUDY_B_CACHE_DIR,
        job=lambda w: {"study": "blocks", "name": w.experiment, "pair": w.pair, "mode": w.mode},
        config=lambda w: block_config(w.experiment),  # the timing job's: a change compiles again
        torch_version=TORCH_VERSION,
    threads: WARM_UP_THREADS
    priority: WARM_UP_PRIORITY
    resources:
        **warm_up_job(),
    script:
        "../../scripts/compile_cache.py"


rule compile_cache_model:
    output:
        manifest=f"{STUDY_B_WARM_UPS}/models/{{pair}}/{{model}}.json",
    log:
        "logs/study_b/compile-cache/models-{pair}-{model}.log",
    params:
        cache_dir=STUDY_B_CACHE_DIR,
        job=lambda w: {"study": "models", "name": w.model, "pair": w.pair},
        config=VISION_CONFIG,  # the vision_model job's
        torch_version=TORCH_VERSION,
    threads: MODEL_WARM_UP_THREADS
    priority: LONG_WARM_UP_PRIORITY  # its vision_model job is one of a run's longest
    resources:
        **warm_up_job(),
    script:
        "../../scripts/compile_cache.py"
