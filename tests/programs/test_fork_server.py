"""The fork server (programs/fork_server.py): Python workers forked from a process that imported torch once, as
Worker's processes: their pipes, environment, exit statuses and kills as a process started directly would have."""
from __future__ import annotations

import os
import signal
import sys

import pytest

from abstraction_cost.measure import affinity, gpu_slots
from abstraction_cost.programs import fork_server
from abstraction_cost.programs.workers import Worker, WorkerDied
from tests.fixtures.repository import REPO

ECHO = [sys.executable, "-m", "tests.fixtures.echo_worker"]


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)   # `python -m tests.fixtures.echo_worker` resolves from the working directory
    monkeypatch.delenv(fork_server.DISABLE_ENV, raising=False)


def test_a_forked_worker_has_the_jobs_environment_argv_working_directory_and_process_group(monkeypatch):
    monkeypatch.setenv("AC_TEST_VALUE", "sent with the request")   # set after the server may have started
    worker = Worker("echo", [*ECHO, "first", "second"])
    assert isinstance(worker.proc, fork_server.ForkedProcess)
    worker.ask(None, "up")
    info = worker.ask("info AC_TEST_VALUE", "info")
    assert info["argv"] == ["first", "second"] and info["cwd"] == str(REPO)
    assert info["env"] == "sent with the request"
    assert info["torch_preloaded"] and not info["cuda_initialized"]
    assert info["pgid"] == os.getpgid(0)   # a kill of the job's group takes it
    from abstraction_cost.run_guard import descendants
    assert worker.proc.pid in descendants(os.getpid())   # and so does a job killing its descendants
    assert worker.ask("hello", "echo")["line"] == "hello"
    worker.close()
    assert worker.proc.returncode == 0


@pytest.mark.parametrize("command, returncode", [("exit 3", 3), ("raise", 1)])
def test_a_forked_workers_exit_status_reaches_the_job(command, returncode):
    worker = Worker("echo", ECHO)
    worker.ask(None, "up")
    with pytest.raises(WorkerDied) as died:
        worker.ask(command, "echo")
    assert died.value.returncode == returncode
    if command == "raise":
        assert any("asked to fail" in line for line in worker.tail)   # its traceback, on its stderr
    worker.close()


def test_a_killed_forked_worker_is_a_dead_worker_with_the_signal():
    worker = Worker("echo", ECHO)
    worker.ask(None, "up")
    os.kill(worker.proc.pid, signal.SIGKILL)
    with pytest.raises(WorkerDied) as died:
        worker.ask("hello", "echo")
    assert died.value.returncode == -signal.SIGKILL and "SIGKILL" in died.value.message
    worker.close()


def test_workers_start_directly_where_the_server_is_off_or_gone(monkeypatch):
    monkeypatch.setenv(fork_server.DISABLE_ENV, "0")
    assert not isinstance(Worker("echo", ECHO).proc, fork_server.ForkedProcess)
    monkeypatch.delenv(fork_server.DISABLE_ENV)
    server = fork_server.shared({**os.environ})
    server.proc.kill()
    server.proc.wait()
    try:
        worker = Worker("echo", ECHO)   # the server is gone: a warning, and the worker as a process of its own
        assert not isinstance(worker.proc, fork_server.ForkedProcess)
        assert worker.ask("hello", "echo")["line"] == "hello"
        worker.close()
    finally:
        fork_server._shared = None   # the next test's workers get a fresh server


def test_a_worker_forked_for_a_staged_job_has_its_slots_cores_and_holds_its_gpu_lock(monkeypatch, tmp_path):
    """The server may start before its job has a GPU slot (gpu_slots.stage): the worker still gets the job's
    cores and its lock, which it holds while it lives, as a directly started process inherits them."""
    fork_server.shared({**os.environ})   # started first, as a staged job starts it
    monkeypatch.setattr(gpu_slots, "LOCK_DIR", tmp_path)
    gpu = gpu_slots.Gpu(0, "GPU-fake-0")
    fd = gpu_slots._try_lock(gpu, "this job")
    monkeypatch.setattr(gpu_slots, "_held", gpu_slots.Slot(gpu, 0.0, fd))
    cpu = max(os.sched_getaffinity(0))
    monkeypatch.setattr(affinity, "_cores", frozenset({cpu}))   # the job's slot: one core
    worker = Worker("echo", ECHO)
    assert isinstance(worker.proc, fork_server.ForkedProcess)
    assert worker.ask("info X", "info")["cpus"] == [cpu]
    os.close(fd)   # the job lets go of its descriptor: its worker's keeps the GPU locked
    assert gpu_slots._try_lock(gpu, "probe") is None
    worker.close()
    probe = gpu_slots._try_lock(gpu, "probe")
    assert probe is not None
    os.close(probe)
