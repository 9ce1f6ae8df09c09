"""A real one-node SLURM cluster on this machine for tests/test_slurm.py: munged, slurmctld and slurmd (Debian's
`munge` and `slurm-wlm`, which `./setup.sh test` installs), started as root with state in a temporary folder, and
stopped again. `start()` raises ClusterUnavailable with the reason where they cannot run.

slurm.conf goes to /etc/slurm (and is removed at the end): srun inside a job finds its config only there (or by
DNS), whatever SLURM_CONF the submitting process had; a slurm.conf that is not this module's is never touched.

The node declares more CPUs and memory than a CI runner has (SlurmdParameters=config_overrides), so that the
jobs of profiles/slurm are accepted as the profile asks for them; and one GPU (a gres backed by /dev/null), so
that the controller checks the profile's GPU requests too, though no job here runs on a GPU.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
NODE_CPUS = 16
NODE_MEMORY_MB = 128000
PARTITION = "debug"
CONF_DIR = Path("/etc/slurm")
MARKER = "# written by tests/slurm_cluster.py\n"


class ClusterUnavailable(RuntimeError):
    """Why the daemons cannot run here (not root, not installed, refused to start)."""


@dataclass
class Cluster:
    root: Path
    conf: Path
    node: str
    processes: list[subprocess.Popen]

    @property
    def env(self) -> dict[str, str]:
        """The environment the SLURM commands (and Snakemake's SLURM plugin) need to find this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *command: str, check: bool = True) -> str:
        return subprocess.run(command, env=self.env, capture_output=True, text=True, check=check,
                              timeout=60).stdout

    def log(self, daemon: str) -> str:
        path = self.root / f"{daemon}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        for proc in reversed(self.processes):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        for name in ("slurm.conf", "gres.conf"):
            path = CONF_DIR / name
            if path.exists() and path.read_text().startswith(MARKER):
                path.unlink()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _conf(root: Path, node: str) -> str:
    return MARKER + f"""\
ClusterName=abstraction-cost-test
SlurmctldHost={node}
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
GresTypes=gpu
NodeName={node} CPUs={NODE_CPUS} RealMemory={NODE_MEMORY_MB} Gres=gpu:1 State=UNKNOWN
PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


def _start_munge(root: Path) -> list[subprocess.Popen]:
    """munged with this machine's key (Debian's package made one), its socket where the clients look for it."""
    if subprocess.run(["munge", "-n"], capture_output=True).returncode == 0:
        return []  # one is running already
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    proc = subprocess.Popen(["runuser", "-u", "munge", "--", "munged", "--foreground"],
                            stdout=open(root / "munged.log", "w"), stderr=subprocess.STDOUT)
    for _ in range(50):
        if subprocess.run(["munge", "-n"], capture_output=True).returncode == 0:
            return [proc]
        time.sleep(0.2)
    proc.terminate()
    raise ClusterUnavailable(f"munged did not start: {(root / 'munged.log').read_text()[-500:]}")


def start(root: Path, timeout_s: float = 60) -> Cluster:
    if os.geteuid() != 0:
        raise ClusterUnavailable("the SLURM daemons are started as root; this test runs as a user")
    missing = [c for c in (*DAEMONS, *CLIENTS, "munge", "runuser") if shutil.which(c) is None]
    if missing:
        raise ClusterUnavailable(f"not installed: {missing} (./setup.sh test installs slurm-wlm and munge)")
    node = socket.gethostname().split(".")[0]
    for d in ("state", "spool"):
        (root / d).mkdir(parents=True, exist_ok=True)
    conf = CONF_DIR / "slurm.conf"
    for path in (conf, CONF_DIR / "gres.conf"):
        if path.exists() and not path.read_text().startswith(MARKER):
            raise ClusterUnavailable(f"{path} exists: this machine has a SLURM setup of its own")
    CONF_DIR.mkdir(parents=True, exist_ok=True)
    conf.write_text(_conf(root, node))
    (CONF_DIR / "gres.conf").write_text(f"{MARKER}NodeName={node} Name=gpu File=/dev/null\n")
    processes = _start_munge(root)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    for daemon in ("slurmctld", "slurmd"):
        processes.append(subprocess.Popen([daemon, "-D", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL,
                                          stderr=open(root / f"{daemon}.stderr", "w")))
    cluster = Cluster(root, conf, node, processes)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        dead = [p.args[0] for p in processes if p.poll() is not None]
        if dead:
            cluster.stop()
            raise ClusterUnavailable(f"{dead} exited: {cluster.log('slurmctld')[-800:]}{cluster.log('slurmd')[-800:]}"
                                     f"{''.join((root / f'{d}.stderr').read_text()[-400:] for d in ('slurmctld', 'slurmd'))}")
        state = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True).stdout
        if state.strip() in ("idle", "mixed", "allocated"):
            return cluster
        time.sleep(0.5)
    cluster.stop()
    raise ClusterUnavailable(f"node {node} not idle after {timeout_s} s: {cluster.log('slurmd')[-800:]}")
