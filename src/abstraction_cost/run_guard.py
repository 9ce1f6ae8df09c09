"""What a Snakemake run of this pipeline checks before it starts, and what its jobs do when it is gone.

- One run per working directory: the run holds an flock on .snakemake/run.lock while it lives (the kernel drops
  it when the process dies, whatever killed it). A second run started beside it stops at once with a message that
  names the live run; dry runs and job processes (cluster executors) take no lock.
- Stale locks cleared: holding that lock proves that no other run of this pipeline is alive here, so Snakemake's
  own locks (.snakemake/locks), left by a run that was SIGKILLed or lost power, are removed, saying so, instead
  of stopping the run with advice to --unlock.
- Writable places: results/, logs/ and the download root are checked before any job, with a message naming the
  folder, instead of a job failing hours in.
- Jobs outlive no run: a rule script whose Snakemake parent dies stops itself (and the programs it launched), so
  no orphan goes on writing outputs that a rerun is about to rewrite.
"""
from __future__ import annotations

import errno
import fcntl
import logging
import os
import sys
import threading
import time
from pathlib import Path

LOCK_FILE = Path(".snakemake") / "run.lock"
SNAKEMAKE_LOCKS = Path(".snakemake") / "locks"
NO_LOCK_FLAGS = ("--dry-run", "--dryrun", "--dry_run", "--nolock")   # runs that take no lock (-n too)
_held: int | None = None   # the lock's file descriptor, kept open for the life of this process

log = logging.getLogger(__name__)


class RunGuardError(RuntimeError):
    """This run must not start; the message says why and what to do."""


def _takes_no_lock(argv: list[str]) -> bool:
    """A dry run (-n, also bundled as in -np) or --nolock: Snakemake's own options, known only from argv while
    the Snakefile is read."""
    short = [a for a in argv if a.startswith("-") and not a.startswith("--")]
    return any(a in NO_LOCK_FLAGS for a in argv) or any("n" in a[1:] and a[1:].isalpha() for a in short)


def check_writable(folders: dict[str, str]) -> None:
    """Raise RunGuardError naming each folder (config key -> path) this run cannot create files in."""
    failures = []
    for key, folder in folders.items():
        path = Path(folder).absolute()
        while not path.exists() and path != path.parent:   # not made yet: where it would be made
            path = path.parent
        probe = path / f".write-probe-{os.getpid()}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as err:
            failures.append(f"'{folder}' ({key}) is not writable: {err.strerror or err}")
    if failures:
        raise RunGuardError("; ".join(failures) + ". The pipeline writes its downloads, tables and logs there: make "
                            "them writable (e.g. chmod -R u+w, or a disk mounted read-write) and run again.")


def claim(argv: list[str] | None = None, main_process: bool = True) -> str | None:
    """Take this directory's run lock (clearing Snakemake's stale locks); returns what was done, to show."""
    global _held
    argv = sys.argv if argv is None else argv
    if _held is not None or not main_process or _takes_no_lock(argv):
        return None
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if err.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        raise RunGuardError(f"another Snakemake ({_owner()}) is running in this directory ({Path.cwd()}); wait "
                            "for it to finish or stop it, then run again. Its lock is live: do not remove it."
                            ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
    _held = fd
    stale = sorted(SNAKEMAKE_LOCKS.glob("*.lock")) if SNAKEMAKE_LOCKS.is_dir() else []
    for path in stale:
        path.unlink(missing_ok=True)
    if stale:
        return ("removed the stale lock of an earlier Snakemake run in this directory that is no longer running "
                "(killed, or the machine went down); its unfinished jobs run again")
    return None


def _owner() -> str:
    try:
        return LOCK_FILE.read_text().strip() or "pid unknown"
    except OSError:
        return "pid unknown"


# ------------------------------------------------------------------------------------------- job side
def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(pid: int) -> list[int]:
    """Every descendant of `pid`, children first: a job's workers are its fork server's children
    (programs/fork_server.py)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    found, todo = [], [pid]
    while todo:
        below = [child for child, parent in parents.items() if parent == todo[0]]
        found += below
        todo = todo[1:] + below
    return found


def watch_snakemake(interval_s: float = 0.5) -> None:
    """In a rule script: stop this job, and what it launched, as soon as its Snakemake parent is gone."""
    parent = os.getppid()
    if "snakemake" not in _cmdline(parent):
        return

    def watch():
        while os.getppid() == parent:
            time.sleep(interval_s)
        log.error("its Snakemake (pid %d) is gone (killed?): this job stops, leaving no output; the next "
                  "`snakemake` run does it again", parent)
        for child in descendants(os.getpid()):
            try:
                os.kill(child, 9)
            except OSError:
                pass
        logging.shutdown()
        os._exit(1)

    threading.Thread(target=watch, name="watch-snakemake", daemon=True).start()
