"""Rule sweep: interleaved, every implementation of one numerics in turns (study_a/sweep/interleaved.py); serial,
one implementation over every cell in each numerics (study_a/sweep/serial.py)."""
import os

from abstraction_cost.compile import inductor_env
from abstraction_cost.measure import gpu_slots
from abstraction_cost.workflow import setup_logging

log = setup_logging(snakemake)
gpu_slots.stage(snakemake)  # first: this job starts beside the one timing on its GPU, off the timing cores
if getattr(snakemake.params, "cache_dir", None):   # before the fork server: its workers build from the warm-up's cache
    os.environ.update(inductor_env.cache_env(os.path.abspath(snakemake.params.cache_dir), None))
if "numerics" in snakemake.wildcards.keys():   # interleaved: its workers fork from the job's fork server
    from abstraction_cost.programs import workers
    workers.start_fork_server()

from abstraction_cost.study_a.sweep import serial as sweep, interleaved as sweep_interleaved  # noqa: E402

gpu_slots.take(snakemake, log)  # after the imports, before CUDA starts: this job's GPU slot, once it is free

(sweep_interleaved if "numerics" in snakemake.wildcards.keys() else sweep).run(snakemake)
gpu_slots.release(log)  # last: the slot to the next job while this one exits, off the timing cores
