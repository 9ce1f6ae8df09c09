"""One timing job's workers start at a time on the host (measure/worker_starts.py, gpus.starts_one_at_a_time):
a turn waits while another process holds it, is free again once released or once its holder dies, and is no wait
at all where turns are off."""
import subprocess
import sys
import time

import pytest

from abstraction_cost.measure import gpu_slots, worker_starts

HOLDER = """
import sys, time
from abstraction_cost.measure import gpu_slots, worker_starts
worker_starts.configure(True)
turn = worker_starts.Turn()
print("holding", flush=True)
time.sleep(float(sys.argv[1]))
turn.release()
print("released", flush=True)
time.sleep(30)
"""


@pytest.fixture
def turns(tmp_path, monkeypatch):
    """Turns on, on gpu_slots' lock folder of the test's own (this process's and the holders')."""
    monkeypatch.setattr(gpu_slots, "LOCK_DIR", tmp_path / "locks")
    monkeypatch.setenv("ABSTRACTION_COST_GPU_LOCK_DIR", str(tmp_path / "locks"))
    worker_starts.configure(True)
    yield tmp_path / "locks"
    worker_starts.configure(False)


def _holder(seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "holding"
    return proc


def test_a_turn_waits_for_another_jobs_start_and_is_free_once_it_is_released(turns):
    holder = _holder(1.5)
    try:
        turn = worker_starts.Turn()
        assert 0.5 <= turn.waited_s < 10.0
        assert (turns / worker_starts.LOCK_NAME).stat().st_mode & 0o777 == 0o666   # every user's jobs take turns
        turn.release()
        turn.release()   # again: nothing
        assert worker_starts.Turn().waited_s < 0.2
    finally:
        holder.kill()
        holder.wait()


def test_a_dead_holders_turn_is_free_at_once(turns):
    holder = _holder(60.0)
    holder.kill()
    holder.wait()
    started = time.monotonic()
    worker_starts.Turn().release()
    assert time.monotonic() - started < 1.0


def test_with_turns_off_no_job_waits(turns):
    holder = _holder(60.0)
    try:
        worker_starts.configure(False)
        turn = worker_starts.Turn()
        assert turn.waited_s == 0.0
        turn.release()
    finally:
        holder.kill()
        holder.wait()
