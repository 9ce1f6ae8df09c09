# GPU slots (src/abstraction_cost/measure/gpu_slots.py): on a box with N GPUs, up to N timing jobs timing at once,
# each on a GPU of its own. Snakemake counts (resource `gpu`, total 3N + 1 for N found by NVML, limited by config
# gpus.slots): beside each timing job the next one starts (staged: its imports on the cores of the jobs that time
# nothing), and its script takes its GPU's lock and sets CUDA_VISIBLE_DEVICES (gpu_slots.take) before CUDA starts,
# waiting while the lock is held. The N + 1 places beyond 2N are long jobs' (gpu_slots.is_long): the others
# also ask for `short_timing` (total 2N), and wait while a long job waits for their GPU. A CPU timing job asks for every
# slot of `timing`, so it keeps the CPU to itself, and every unit of `compile`, of which a compile warm-up takes one,
# so that no compile runs beside it; with gpus.cpu_beside it asks instead for the one unit of `cpu_slot` and times on
# cores of its own beside the GPU slots' jobs (gpu_slots.cpu_beside: a box with GPU slots, device not cpu). A job that
# can only write not_run rows (no GPU here, and its rows need one: gpu_slots.measures_nothing) asks for neither. On a
# cluster (profiles/slurm) there are no totals: every job gets an allocation of its own, with a GPU (`gpu`) where it
# times on one, and the whole node (--exclusive) where it times on the CPU.
from abstraction_cost.measure import gpu_slots

# A cluster run is one with --jobs (nodes) for a remote executor: Snakemake's own test for not limiting cores
# locally (scheduling/job_scheduler.py); the executor itself is not known yet while the Snakefile is read.
ON_CLUSTER = workflow.resource_settings.nodes is not None
# The device timing jobs ask for: config `device`, where on a cluster `auto` means the GPU if the cluster has
# any (sinfo), since the login node that reads this has none of its own.
DEVICE = config["device"]
if workflow.is_main_process and ON_CLUSTER and DEVICE == "auto":
    try:
        DEVICE = gpu_slots.resolve_on_cluster(DEVICE, gpu_slots.cluster_has_gpus())
    except gpu_slots.GpuSlotsError as err:
        raise WorkflowError(str(err)) from None
if workflow.is_main_process and not ON_CLUSTER:
    try:
        GPU_SLOTS = gpu_slots.slots(config)
    except gpu_slots.GpuSlotsError as err:
        raise WorkflowError(str(err)) from None
    COMPILE_UNITS = max(workflow.cores or 1, 1)  # a compile warm-up takes one, a CPU timing job all
    _totals = (("gpu", GPU_SLOTS and gpu_slots.timing_total(GPU_SLOTS)), ("timing", gpu_slots.timing_total(GPU_SLOTS)),
               ("short_timing", gpu_slots.short_total(GPU_SLOTS)), ("compile", COMPILE_UNITS), ("cpu_slot", 1))
    for _name, _total in _totals:
        if _name not in workflow.global_resources.keys():  # --resources on the command line wins
            workflow.register_resource(_name, _total)
else:
    GPU_SLOTS = None  # a cluster's jobs, or a job's own process: no box-wide totals here
    COMPILE_UNITS = 1  # (a cluster run has no --cores)

# Priorities, highest first among the jobs ready to run: tables and summaries (seconds, so the report is made as
# soon as its inputs exist), what timing jobs read (datasets, weights, C++ builds, AOTInductor packages: before the
# warm-ups, which would otherwise hold every free core for minutes while the GPUs wait for Study A's inputs), a
# compile warm-up (a few threads; its timing job waits for it), a long job's before a short one's, the longest
# timing jobs (the sweep's and Study B's vision models: so no long job starts last), then every other job (0).
# Priorities order only when jobs start; their share of a busy core is the kernel's: gpus.warm_up_nice lowers the
# warm-ups' there too (compile_cache.yield_cores).
SUMMARY_PRIORITY = 60
INPUT_PRIORITY = 55
LONG_WARM_UP_PRIORITY = 51
WARM_UP_PRIORITY = 50
LONG_JOB_PRIORITY = 40
WARM_UP_THREADS = 2  # a compile worker (compile_cache.worker_plan)
# A vision model's warm-up compiles two tasks (the model whole, its blocks): a worker each, so its job, one of the
# longest, waits for the longer task rather than both in turn, while its GPU may stand idle (tests/test_schedule.py)
MODEL_WARM_UP_THREADS = 2 * WARM_UP_THREADS


def every_timing_slot(wildcards=None):
    """What a job asks for that may run beside no timing job (a CPU timing job)."""
    return gpu_slots.timing_total(GPU_SLOTS or 0)


def every_compile_unit(wildcards=None):
    """What a CPU timing job asks for of `compile`: all of it, so no compile warm-up runs beside it."""
    return COMPILE_UNITS


DEVICE_CONFIG = {**config, "device": DEVICE}  # the config as timing jobs see it (the device resolved)
CPU_BESIDE = gpu_slots.cpu_beside(DEVICE_CONFIG, GPU_SLOTS)  # a CPU timing job on a CPU slot beside the GPU slots


def measures_nothing(rule, wildcards):
    """Whether a timing job can only write not_run rows on this box (gpu_slots.measures_nothing): it takes no
    timing resource, and no compile warm-up runs for it."""
    return gpu_slots.measures_nothing(rule, wildcards, DEVICE_CONFIG, GPU_SLOTS)


def on_gpu_slot(rule, wildcards):
    """Whether a job of timing rule `rule` times on a GPU (slot)."""
    return gpu_slots.on_gpu(rule, wildcards, DEVICE_CONFIG, GPU_SLOTS)


def timing_job(rule):
    """A timing rule's resources: on the GPU one GPU slot; on the CPU every timing slot and every compile unit
    (locally; with gpus.cpu_beside the CPU slot instead) or a whole node (SLURM); nothing where the job can only
    write not_run rows (no GPU here and its rows need one: gpu_slots.measures_nothing). `rule` must be in
    gpu_slots.DEVICE_RULES or PAIR_RULES, which say what its device is."""
    def gpu(wildcards):
        return int(on_gpu_slot(rule, wildcards))

    def on_cpu(wildcards):
        """Times on the CPU."""
        return not gpu(wildcards) and not measures_nothing(rule, wildcards)

    def alone(wildcards):
        """Times on the CPU and keeps the box to itself."""
        return on_cpu(wildcards) and not CPU_BESIDE

    return dict(
        gpu=gpu,
        timing=lambda wildcards: every_timing_slot() if alone(wildcards) else gpu(wildcards),
        short_timing=lambda wildcards: 0 if gpu_slots.is_long(rule, dict(wildcards.items()), DEVICE_CONFIG)
        else gpu(wildcards),
        compile=lambda wildcards: every_compile_unit() if alone(wildcards) else 0,
        cpu_slot=lambda wildcards: int(on_cpu(wildcards) and CPU_BESIDE),
        slurm_extra=lambda wildcards: "--exclusive" if on_cpu(wildcards) else "",
    )


# Whether a GPU slot's timing job has cores no other job uses (measure/affinity.py); never on a cluster (GPU_SLOTS
# None), where a job's threads are its allocation's CPUs (--cpus-per-task).
SLOTS_HAVE_OWN_CORES = gpu_slots.slots_have_own_cores(GPU_SLOTS, CPU_BESIDE)


def timing_threads(rule):
    """A timing rule's threads: none of --cores where it times on a GPU slot with cores of its own, since --cores
    then counts only what the other jobs share; otherwise one. Invariant: builds and warm-ups filling --cores never
    keep a ready GPU timing job from its idle GPU."""
    def threads(wildcards):
        return 0 if SLOTS_HAVE_OWN_CORES and on_gpu_slot(rule, wildcards) else 1

    return threads


def cluster_gpu(needed):
    """A job that is no timing job but needs a GPU where it runs on a cluster (compiling for the GPU); locally
    it runs beside the timing jobs and takes no slot."""
    return dict(gpu=lambda wildcards: int(needed and GPU_SLOTS is None))


def warm_up_job(on_gpu=lambda w: w.pair == "gpu"):
    """A compile warm-up's resources: no timing slot, so it runs beside GPU timing jobs on the cores they leave,
    and one compile unit, so never beside a CPU timing job that keeps the box; on a cluster a GPU where it compiles
    for the GPU (on_gpu(wildcards): Study B's for its job's `pair` gpu)."""
    return dict(compile=1, gpu=lambda w: int(GPU_SLOTS is None and on_gpu(w) and DEVICE != "cpu"))
