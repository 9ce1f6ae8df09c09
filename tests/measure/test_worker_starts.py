"""One timing job's workers start at a time on the host (measure/worker_starts.py, gpus.starts_one_at_a_time):
a turn waits while another process holds it, is free again once released or once its holder dies, and is no wait
at all where turns are off."""
import subprocess
import sys
import time

import pytest

from abstraction_cost.measure import worker_starts

HOLDER = """
import sys, time
from pathlib import Path
from abstraction_cost.measure import worker_starts
worker_starts.configure(True, Path(sys.argv[1]))
turn = worker_starts.Turn()
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
turn.release()
print("released", flush=True)
time.sleep(30)
"""


@pytest.fixture
def turns(tmp_path):
    worker_starts.configure(True, tmp_path / "locks")
    yield tmp_path / "locks"
    worker_starts.configure(False, tmp_path / "locks")


def _holder(folder, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder), str(seconds)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "holding"
    return proc


def test_a_turn_waits_for_another_jobs_start_and_is_free_once_it_is_released(turns):
    holder = _holder(turns, 1.5)
    try:
        turn = worker_starts.Turn()
        assert 0.5 <= turn.waited_s < 10.0
        turn.release()
        turn.release()   # again: nothing
        assert worker_starts.Turn().waited_s < 0.2
    finally:
        holder.kill()
        holder.wait()


def test_a_dead_holders_turn_is_free_at_once(turns):
    holder = _holder(turns, 60.0)
    holder.kill()
    holder.wait()
    started = time.monotonic()
    worker_starts.Turn().release()
    assert time.monotonic() - started < 1.0


def test_with_turns_off_no_job_waits(tmp_path, turns):
    holder = _holder(turns, 60.0)
    try:
        worker_starts.configure(False, turns)
        turn = worker_starts.Turn()
        assert turn.waited_s == 0.0
        turn.release()
    finally:
        holder.kill()
        holder.wait()
