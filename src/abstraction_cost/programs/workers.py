"""A served worker process: one implementation's long-lived process, told what to do by commands on its stdin, answering
in JSON-lines records on its stdout (a C++ program with --serve, or a Python worker). Study A's sweep conductor and
Study B's vision protocol both run their workers through Worker; a Python worker sets up its end with
worker_records, and is forked from the job's fork server (fork_server.py: torch imported once per job)."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections import deque

from ..measure import affinity
from . import fork_server, native

log = logging.getLogger(__name__)


class WorkerDied(RuntimeError):
    def __init__(self, status: str, message: str, returncode: int | None):
        super().__init__(message)
        self.status, self.message, self.returncode = status, message, returncode


def worker_records(label: str):
    """A served worker's end of Worker's pipe: the records' stream on a copy of stdout, with stdout itself pointed
    at stderr so that no library's print can corrupt the protocol; the worker's logging to stderr, as `label`."""
    records = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=f"%(asctime)s {label} %(levelname)s %(message)s")
    return records


def start_fork_server() -> None:
    """Start this job's fork server now (a timing job, once its environment is set and before it has its GPU
    slot: gpu_slots.stage), so that its imports overlap the job's own start and the job timing before it."""
    fork_server.shared(native.runtime_env())


def _start(command: list[str]):
    """A Python worker (`python -m MODULE ...`) forked from the job's fork server, which has torch imported, with
    the job's environment, cores and GPU-slot locks; any other program, or every process where the server is off
    or gone, started directly."""
    env, held = native.runtime_env(), native.gpu_slots.held_fds()
    if command[:2] == [sys.executable, "-m"]:
        server = fork_server.shared(env)
        if server is not None:
            try:
                return server.spawn(command[1:], env, held=held, cpus=affinity.job_cores())
            except fork_server.ServerGone as err:
                log.warning("%s: started directly: %s", command[2], err)
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, errors="replace", bufsize=1, env=env, pass_fds=held)


class Worker:
    """One implementation's process: commands on its stdin, JSON-lines records on its stdout."""

    def __init__(self, name: str, command: list[str]):
        self.name, self.command = name, [str(c) for c in command]
        self.proc = _start(self.command)
        self.tail: deque = deque(maxlen=native.STDERR_TAIL_LINES)
        self._stderr = threading.Thread(target=self._drain, name=f"{name}-stderr", daemon=True)
        self._stderr.start()

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self.tail.append(line.rstrip("\n"))
            log.info("[%s] %s", self.name, line.rstrip("\n"))

    def send(self, command: str) -> None:
        """One command, its answer not waited for (ask(None, ...) reads it)."""
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: reading its stdout to the end says how

    def ask(self, command: str | None, *kinds: str) -> dict:
        """Send one command (None: only read) and return the first record of one of `kinds`."""
        if command is not None:
            self.send(command)
        for line in self.proc.stdout:
            record = native.record_of(line.strip())
            if record is None:
                if line.strip():
                    log.info("[%s stdout] %s", self.name, line.strip())
                continue
            if record["kind"] in kinds:
                return record
            if record["kind"] == "error":
                raise WorkerDied(record.get("status", "error"), record.get("message") or "error", None)
        code = self.proc.wait()
        self._stderr.join(timeout=5)
        status, message = native.Result(self.command, code, [], list(self.tail)).failure() or (
            "error", f"{self.name} ended its output before answering {command!r}")
        raise WorkerDied(status, message, code)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._stderr.join(timeout=5)
