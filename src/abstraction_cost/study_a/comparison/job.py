"""Rule eval_backend's job: every implementation of params.implementations in one numerics (wildcards.numerics);
output.tables and output.logits in that order, output.env the job's environment rows. The protocol's mode
(study_a.backends.protocol.mode) says how: interleaved (eval_interleaved.py, the default) or serial
(eval_job.run_serial, the study's)."""
from __future__ import annotations

from ... import faults
from . import interleaved as eval_interleaved, serial as eval_job


def run_job(snakemake) -> None:
    if faults.eval_numerics(snakemake.wildcards.numerics) == "kill":
        faults.kill_job()
    mode = (snakemake.config["study_a"]["backends"].get("protocol") or {}).get("mode", "interleaved")
    (eval_interleaved.run if mode == "interleaved" else eval_job.run_serial)(snakemake)
