"""Rule eval_backend: every implementation of ResNet-50 evaluated on the comparison's batch in one numerics
(study_a/comparison/job.py)."""
from abstraction_cost.measure import gpu_slots
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
gpu_slots.stage(snakemake)  # first: this job starts beside the one timing on its GPU, off the timing cores
if (snakemake.config["study_a"]["backends"].get("protocol") or {}).get("mode", "interleaved") == "interleaved":
    from abstraction_cost.programs import workers   # its workers fork from the job's fork server
    workers.start_fork_server()

from abstraction_cost.study_a.comparison import job as eval_backend  # noqa: E402

gpu_slots.take(snakemake, log)  # after the imports, before CUDA starts: this job's GPU slot, once it is free

eval_backend.run_job(snakemake)
gpu_slots.release(log)  # last: the slot to the next job while this one exits, off the timing cores
