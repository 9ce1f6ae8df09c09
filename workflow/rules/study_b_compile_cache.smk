# Study B's compile cache (compiler/compile_cache.py): before any Study B job times anything, rule compile_cache
# compiles every graph the building-block and vision-model jobs will compile, in parallel processes, into the
# pipeline's own Inductor cache; those jobs then compile warm from it. Skipped with study_b.fresh_compile_cache
# (every job compiles cold into an empty cache of its own).

rule compile_cache:
    output:
        manifest=STUDY_B_CACHE_MANIFEST,
    log:
        "logs/study_b/compile-cache.log",
    params:
        cache_dir=STUDY_B_CACHE_DIR,
        # what it compiles: a change of these compiles again (a params change is a rerun trigger)
        cases=(config["study_b"]["models"], config["study_b"]["blocks"], config["numerics"], config["seed"],
               TORCH_VERSION),
    threads: 16 if ON_CLUSTER else workflow.cores  # every core; a cluster has no --cores: profiles/slurm's 16 CPUs
    priority: 50  # first among the timing jobs: every Study B job waits for it
    resources:
        timing=every_timing_slot,  # its load on every core would disturb anything timed beside it
        **cluster_gpu(config["device"] == "cuda"),
    script:
        "../../scripts/compile_cache.py"
