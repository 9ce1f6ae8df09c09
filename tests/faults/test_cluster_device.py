"""A cluster whose login node has no GPU: there `device: auto` cannot be told from the node that reads the
config, so it means the GPU where SLURM lists a GPU GRES (sinfo) and is refused, naming the key and the fix, where
it cannot be told."""
import os
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

from abstraction_cost.measure import gpu_slots
from tests.fixtures import loopback

from .conftest import REPO


def test_device_auto_on_a_cluster_is_the_gpu_where_sinfo_lists_one_else_refused():
    assert gpu_slots.resolve_on_cluster("auto", has_gpus=True) == "cuda"
    assert gpu_slots.resolve_on_cluster("cpu", has_gpus=True) == "cpu"
    for has_gpus in (False, None):   # sinfo lists no GPU GRES; sinfo does not answer
        with pytest.raises(gpu_slots.GpuSlotsError, match="config key 'device' is 'auto'.*set device: cuda"):
            gpu_slots.resolve_on_cluster("auto", has_gpus=has_gpus)


def test_a_device_auto_config_submitted_to_slurm_without_an_answer_from_sinfo_stops_before_any_job(tmp_path):
    # SLURM_CONF names a cluster whose controller is a loopback port where nothing listens: sinfo cannot answer, as
    # on a machine that reaches no cluster. (A SLURM_CONF naming no file also fails, but only after sinfo retries
    # reading it for 60 s, gpu_slots' timeout; a refused connection fails in about 9 s.)
    port = urlsplit(loopback.refused_url()).port
    conf = tmp_path / "unreachable-slurm.conf"
    conf.write_text(f"ClusterName=unreachable\nSlurmctldHost=localhost\nSlurmctldPort={port}\n"
                    "NodeName=localhost CPUs=1 State=UNKNOWN\nPartitionName=debug Nodes=localhost Default=YES\n")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "SLURM_CONF": str(conf)}
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path),
                          "--workflow-profile", str(REPO / "profiles" / "slurm"),
                          "--configfile", str(REPO / "config" / "paper.yaml")],
                         capture_output=True, text=True, timeout=300, env=env)
    out = run.stdout + run.stderr
    assert run.returncode != 0
    assert "config key 'device' is 'auto'" in out and "set device: cuda" in out and "device: cpu" in out, out[-2000:]
    assert "Job stats" not in out
