"""What every rule script shares: logging into the rule's log file, the config it ran with, and, for a job that
times nothing, CPU cores off the timing jobs' (measure/affinity.py)."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from . import run_guard
from .measure import gpu_slots


def setup_logging(snakemake) -> logging.Logger:
    """Send this script's log records (and uncaught exceptions) to the rule's log file, and to stderr."""
    handlers = [logging.StreamHandler(sys.stderr)]
    if snakemake.log:
        Path(snakemake.log[0]).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(snakemake.log[0], mode="w"))
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger(f"rule.{snakemake.rule}")

    def excepthook(kind, value, tb):
        log.error("failed", exc_info=(kind, value, tb))
    sys.excepthook = excepthook
    run_guard.watch_snakemake()
    gpu_slots.pin_untimed(snakemake)
    return log
