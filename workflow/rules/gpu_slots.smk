# GPU slots (src/abstraction_cost/measure/gpu_slots.py): on a box with N GPUs, up to N timing jobs at once, each
# on a GPU of its own. Snakemake counts (resource `gpu`, total N found by NVML, limited by config gpus.slots); each
# job's script takes its GPU's lock and sets CUDA_VISIBLE_DEVICES (gpu_slots.take) before torch starts. A CPU
# timing job asks for every slot of `timing`, so it keeps the CPU to itself. On a cluster (profiles/slurm) there
# are no totals: every job gets an allocation of its own, with a GPU (`gpu`) where it times on one, and the whole
# node (--exclusive) where it times on the CPU.
from abstraction_cost.measure import gpu_slots

# A cluster run is one with --jobs (nodes) for a remote executor: Snakemake's own test for not limiting cores
# locally (scheduling/job_scheduler.py); the executor itself is not known yet while the Snakefile is read.
ON_CLUSTER = workflow.resource_settings.nodes is not None
if workflow.is_main_process and not ON_CLUSTER:
    try:
        GPU_SLOTS = gpu_slots.slots(config)
    except gpu_slots.GpuSlotsError as err:
        raise WorkflowError(str(err)) from None
    for _name, _total in (("gpu", GPU_SLOTS), ("timing", max(GPU_SLOTS, 1))):
        if _name not in workflow.global_resources.keys():  # --resources on the command line wins
            workflow.register_resource(_name, _total)
else:
    GPU_SLOTS = None  # a cluster's jobs, or a job's own process: no box-wide totals here


def every_timing_slot(wildcards=None):
    """What a job asks for that may run beside no timing job (a CPU timing job, the compile-cache warm-up)."""
    return max(GPU_SLOTS or 1, 1)


def timing_job(rule):
    """A timing rule's resources: on the GPU one GPU slot; on the CPU every timing slot (locally) or a whole
    node (SLURM). `rule` must be in gpu_slots.DEVICE_RULES or PAIR_RULES, which say what its device is."""

    def gpu(wildcards):
        return int(gpu_slots.on_gpu(rule, wildcards, config, GPU_SLOTS))

    return dict(
        gpu=gpu,
        timing=lambda wildcards: 1 if gpu(wildcards) else every_timing_slot(),
        slurm_extra=lambda wildcards: "" if gpu(wildcards) else "--exclusive",
    )


def cluster_gpu(needed):
    """A job that is no timing job but needs a GPU where it runs on a cluster (compiling for the GPU); locally
    it runs beside the timing jobs and takes no slot."""
    return dict(gpu=lambda wildcards: int(needed and GPU_SLOTS is None))
