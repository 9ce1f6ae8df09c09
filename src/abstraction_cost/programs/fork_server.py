"""A fork server: one process per job that imports torch, torchvision and dynamo once (PRELOAD) and then forks each
Python worker from itself, so that a worker's start-up does not pay those imports again. On the H100 machines a
Study B worker took 7-9 s from its start to its first answer, and every invocation of every timing job starts its
workers afresh (docs/results/2026-11-26-h100-gpu-smoke-kernels-from-the-sweep.md).

The server never initialises CUDA (it refuses to serve if an import did): CUDA cannot be used in a process forked
after it started, while torch itself forks safely before (as DataLoader's workers do). A child is a fresh worker in
everything the measurement sees: it runs its module as __main__ (runpy) with the environment, working directory,
CPU cores and pipes the job sent, and initialises CUDA itself. A staged timing job starts its server before it has
a GPU slot (measure/gpu_slots.py), so the slot's lock and cores come with each request, not from the server: the
child keeps the job's lock descriptors open (a worker holds the GPU while it lives, as a C++ program the job
launches does). It stays in the job's process group (a scheduler's or a test's kill of the group takes it), and a
job that kills what it launched kills its descendants (run_guard.descendants).

Protocol, over a SOCK_SEQPACKET socket pair (one message per send):
    job -> server   {"argv": ["-m", MODULE, ARG...], "env": {...}, "cwd": DIR, "cpus": [N, ...] | null} with three
                    file descriptors (the child's stdin, stdout, stderr) and then the job's GPU-slot locks
                    (socket.send_fds; at most MAX_HELD)
    server -> job   {"pid": N}                          the child forked (or {"error": ...})
    server -> job   {"exit": N, "returncode": R}        it ended (R < 0: killed by signal -R)
The job's end (ForkServer, ForkedProcess) looks like subprocess.Popen to programs/workers.Worker. A server that
cannot start or dies leaves Worker starting its processes as before (a warning says so); a dead child is only
that worker's failure, as a process started directly.
"""
from __future__ import annotations

import importlib
import json
import logging
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

log = logging.getLogger(__name__)

PRELOAD = ("torch", "torchvision", "torch._dynamo")   # about 3.5 s of a worker's imports; polars is not among
# them: its thread pool does not survive a fork
DISABLE_ENV = "AC_FORK_SERVER"   # "0": every worker started directly
MESSAGE_BYTES = 1 << 20
MAX_HELD = 8   # lock descriptors a request may pass on (a job holds one per GPU slot it took)


class ServerGone(RuntimeError):
    pass


# ------------------------------------------------------------------------------------------------ the job's end
class ForkedProcess:
    """A child of the fork server, as Worker uses a Popen: pid, stdin/stdout/stderr (text, line-buffered),
    poll(), wait(), kill(), returncode."""

    def __init__(self, pid: int, stdin, stdout, stderr, server: "ForkServer"):
        self.pid, self.stdin, self.stdout, self.stderr, self._server = pid, stdin, stdout, stderr, server
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.returncode(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.poll() is None:
            if not self._server.wait(self.pid, timeout):
                raise subprocess.TimeoutExpired(f"forked pid {self.pid}", timeout)
            self.poll()
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class ForkServer:
    """The job's fork server: started once (shared()), forks a worker per spawn()."""

    def __init__(self, env: dict[str, str]):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([sys.executable, "-m", __name__, str(theirs.fileno())],
                                     pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     errors="replace")
        theirs.close()
        self.sock = ours
        self._lock = threading.Lock()           # one spawn at a time: replies come in request order
        self._changed = threading.Condition()
        self._pids: list[int | str] = []          # spawn replies not yet taken
        self._exits: dict[int, int] = {}
        self.alive = True
        threading.Thread(target=self._read, name="fork-server", daemon=True).start()
        threading.Thread(target=self._log, name="fork-server-stderr", daemon=True).start()

    def _log(self) -> None:
        for line in self.proc.stderr:
            log.info("[fork server] %s", line.rstrip("\n"))

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(MESSAGE_BYTES)
            except OSError:
                data = b""
            with self._changed:
                if not data:
                    self.alive = False
                    self._changed.notify_all()
                    return
                message = json.loads(data)
                if "exit" in message:
                    self._exits[message["exit"]] = message["returncode"]
                else:
                    self._pids.append(message.get("pid") or f"the fork server: {message.get('error')}")
                self._changed.notify_all()

    def spawn(self, argv: list[str], env: dict[str, str], cwd: str | None = None, held: tuple[int, ...] = (),
              cpus=None) -> ForkedProcess:
        """A child running `argv` (["-m", MODULE, ARG...]) with `env`, on `cpus` (None: the server's), holding
        the descriptors `held` open, its pipes like Popen's with text=True and bufsize=1; ServerGone where the
        server cannot fork it."""
        if len(held) > MAX_HELD:
            raise ServerGone(f"{len(held)} descriptors to hold, more than {MAX_HELD}")
        child_in, job_in = os.pipe()
        job_out, child_out = os.pipe()
        job_err, child_err = os.pipe()
        request = json.dumps({"argv": argv, "env": env, "cwd": cwd or os.getcwd(),
                              "cpus": None if cpus is None else sorted(cpus)}).encode()
        try:
            with self._lock:
                if not self.alive:
                    raise ServerGone("the fork server has ended")
                try:
                    socket.send_fds(self.sock, [request], [child_in, child_out, child_err, *held])
                except OSError as err:
                    raise ServerGone(f"the fork server did not take the request: {err}") from err
                with self._changed:
                    self._changed.wait_for(lambda: self._pids or not self.alive, timeout=60)
                    if not self._pids:
                        raise ServerGone("the fork server did not answer")
                    pid = self._pids.pop(0)
            if isinstance(pid, str):
                raise ServerGone(pid)
        except ServerGone:
            for fd in (job_in, job_out, job_err):
                os.close(fd)
            raise
        finally:
            for fd in (child_in, child_out, child_err):
                os.close(fd)
        return ForkedProcess(pid, os.fdopen(job_in, "w", buffering=1, errors="replace"),
                             os.fdopen(job_out, "r", errors="replace"), os.fdopen(job_err, "r", errors="replace"),
                             self)

    def returncode(self, pid: int) -> int | None:
        with self._changed:
            return self._exits.get(pid)

    def wait(self, pid: int, timeout: float | None) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: pid in self._exits or not self.alive, timeout=timeout) and (
                pid in self._exits)

    def close(self) -> None:
        """The server ends once the job's end of the socket closes; its children go on (each is a worker)."""
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


_shared: ForkServer | None = None
_shared_lock = threading.Lock()


def shared(env: dict[str, str]) -> ForkServer | None:
    """This process's fork server, started on first use; None where it is turned off (AC_FORK_SERVER=0), or it
    could not start or has died (the caller starts its process directly)."""
    global _shared
    if os.environ.get(DISABLE_ENV) == "0":
        return None
    with _shared_lock:
        if _shared is not None and not _shared.alive:
            log.warning("the fork server ended (exit status %s); workers start directly", _shared.proc.poll())
            return None
        if _shared is None:
            _shared = ForkServer(env)
        return _shared


# --------------------------------------------------------------------------------------------- the server's end
def _child(request: dict, fds: list[int]) -> None:
    """In the forked child: the job's pipes on 0, 1, 2 (its locks, the rest of `fds`, kept open), its cores and
    environment, then the module as __main__."""
    argv, env, cwd = request["argv"], request["env"], request["cwd"]
    code = 1
    try:
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
        for fd in fds[:3]:
            os.close(fd)
        if request.get("cpus"):
            os.sched_setaffinity(0, request["cpus"])
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        # the import path a fresh `python -m` would have: its working directory first, then PYTHONPATH's entries
        sys.path[0] = cwd
        for entry in reversed(env.get("PYTHONPATH", "").split(os.pathsep)):
            if entry and entry not in sys.path:
                sys.path.insert(1, entry)
        if argv[:1] != ["-m"] or len(argv) < 2:
            raise ValueError(f"the fork server runs modules only (-m MODULE ...), not {argv!r}")
        sys.argv = [argv[1], *argv[2:]]
        try:
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if not isinstance(stop.code, (int, type(None))):
                print(stop.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - what the child died of goes to its stderr, as a fresh process's would
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def serve(sock: socket.socket) -> None:
    import torch
    for module in PRELOAD:
        importlib.import_module(module)
    if torch.cuda.is_initialized():
        raise RuntimeError("an import initialised CUDA: a forked worker could not use it")
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)   # wakes select through the wake-up fd
    print(f"up: {', '.join(PRELOAD)} imported in {time.process_time():.1f} s of CPU", file=sys.stderr, flush=True)
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                sock.send(json.dumps({"exit": pid, "returncode": os.waitstatus_to_exitcode(status)}).encode())
        if sock in ready:
            data, fds, _, _ = socket.recv_fds(sock, MESSAGE_BYTES, 3 + MAX_HELD)
            if not data:
                return
            try:
                request = json.loads(data)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
            except Exception as err:  # noqa: BLE001 - the job starts this worker directly
                for fd in fds:
                    os.close(fd)
                sock.send(json.dumps({"error": f"{type(err).__name__}: {err}"}).encode())
                continue
            if pid == 0:
                sock.close()
                os.close(wake_r)
                os.close(wake_w)
                _child(request, fds)
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"pid": pid}).encode())


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
