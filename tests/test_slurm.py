"""profiles/slurm against a real SLURM controller and node on this machine (tests/fixtures/slurm_cluster.py; the node has one
GPU GRES backed by no GPU): a small target of config/smoke.yaml runs through snakemake-executor-plugin-slurm; its
jobs are submitted with the profile's resources, finish, and leave the same tables (schema and status) as a local
run of the same target. A paper-shaped config (device auto) resolves to the GPU on this cluster: each of its GPU
timing jobs asks for and runs on gres/gpu:1, and no other job of it, nor any job of the CPU config, asks for one."""
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from abstraction_cost import tables

from tests.fixtures import slurm_cluster

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
# Study A's eager training of one dataset: the data rules, then one CPU timing job (--exclusive on SLURM)
TABLE = "training"
TARGET = "results/study_a/train/eager/digits/kaiming-normal-fan-out/seed0.rows.parquet"
TIMING_RULES = {"train_eager"}
# A paper-shaped config: device auto, as config/paper.yaml; one training job and the building-block jobs of both
# pairs, each a timing job (the gpu pair and the training on the GPU, the cpu pair on a whole node)
GPU_SHAPED_TARGETS = [TARGET, "results/study_b/blocks/matmul/gpu-default.rows.parquet",
                      "results/study_b/blocks/matmul/cpu-default.rows.parquet"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        c = slurm_cluster.start(tmp_path_factory.mktemp("slurm"))
    except slurm_cluster.ClusterUnavailable as err:
        pytest.skip(f"no local SLURM cluster: {err}")
    yield c
    c.stop()


# The plugin's first status check waits 40 s after a submission, and each check that finds nothing finished waits
# 10 s longer: most of a run's time on this idle cluster. The test checks every 2 s; what jobs ask for is the profile's.
STATUS_CHECKS = ["--slurm-init-seconds-before-status-checks", "2", "--seconds-between-status-checks", "2"]


def start_target(workdir: Path, profile: str, env: dict, config: str = "config/smoke.yaml",
                 targets: tuple[str, ...] = (TARGET,)) -> subprocess.Popen:
    workdir.mkdir(parents=True, exist_ok=True)
    command = [str(SNAKEMAKE), "--workflow-profile", profile, "--configfile", config,
               "-s", "Snakefile", "-d", str(workdir), *targets]
    command += ["--cores", "2"] if profile == "profiles/default" else STATUS_CHECKS
    # output to files, not pipes: two runs at once, each waited for in turn, must never block on a full pipe
    with open(workdir / "snakemake.stdout", "w") as stdout, open(workdir / "snakemake.stderr", "w") as stderr:
        return subprocess.Popen(command, cwd=REPO, env={**env, "PYTHONPATH": str(REPO / "src")}, stdout=stdout,
                                stderr=stderr, text=True)


def paper_shaped_config(path: Path) -> Path:
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config["device"] = "auto"  # as config/paper.yaml
    config["study_a"]["training"]["datasets"] = ["digits"]
    # what its jobs ask SLURM for is checked, not what they compute: a few training steps, not the smoke config's
    # 3 x 45 (queued behind the CPU run's --exclusive training on the one node: 45 s of this module on 2 cores)
    config["data"].update(limit_train=64, limit_test=64)
    config["study_b"]["fresh_compile_cache"] = True  # as config/paper.yaml: no warm-up jobs
    config["study_b"]["blocks"]["matmul"].update(pairs=["cpu", "gpu"], modes=["default"])
    path.write_text(yaml.safe_dump(config))
    return path


def run_jobs(scontrol: str, run_id: str) -> str:
    """scontrol's lines of one Snakemake run's jobs: the plugin names each job after its run ('SLURM run ID')."""
    return "\n".join(line for line in scontrol.splitlines() if re.search(rf"\bJobName={re.escape(run_id)}\b", line))


@pytest.fixture(scope="module")
def cluster_runs(cluster, tmp_path_factory):
    """Both SLURM runs of this module at once on the one cluster: the smoke config's target (slurm_run) and the
    paper-shaped config's targets (gpu_shaped_run). Most of each run's time is its jobs' start-up and the status
    checks' waits, which overlap; the controller queues what the node cannot hold at once (an --exclusive job, a
    second GPU job). Each run's jobs are told apart by their job name, the run's SLURM run ID."""
    workdir = tmp_path_factory.mktemp("slurm-run")
    gpu_workdir = tmp_path_factory.mktemp("slurm-gpu-run")
    config = paper_shaped_config(gpu_workdir / "paper-shaped.yaml")
    procs = {"cpu": start_target(workdir, "profiles/slurm", cluster.env),
             "gpu": start_target(gpu_workdir, "profiles/slurm", cluster.env, str(config), tuple(GPU_SHAPED_TARGETS))}
    try:
        for proc in procs.values():
            proc.wait(timeout=1200)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    scontrol = cluster.run("scontrol", "show", "jobs", "-o", "-d")
    runs = {}
    for name, where in (("cpu", workdir), ("gpu", gpu_workdir)):
        done = subprocess.CompletedProcess(procs[name].args, procs[name].returncode,
                                           (where / "snakemake.stdout").read_text(),
                                           (where / "snakemake.stderr").read_text())
        output = done.stdout + done.stderr
        run_id = re.search(r"SLURM run ID: (\S+)", output)
        jobs = run_jobs(scontrol, run_id.group(1)) if run_id else ""
        (where / "scontrol-jobs.txt").write_text(jobs)  # for a person reading a failure
        runs[name] = (where, done, jobs)
    return runs


@pytest.fixture(scope="module")
def slurm_run(cluster, cluster_runs):
    workdir, done, scontrol = cluster_runs["cpu"]
    assert done.returncode == 0, (done.stdout[-3000:] + done.stderr[-5000:] + cluster.log("slurmctld")[-2000:])
    assert scontrol, done.stdout[-3000:] + done.stderr[-3000:]
    return workdir, done, scontrol


@pytest.fixture(scope="module")
def gpu_shaped_run(cluster_runs):
    workdir, done, scontrol = cluster_runs["gpu"]
    # the jobs run on no real GPU: a GPU job may end not_run or failed; its request is what is checked
    assert "config key 'device'" not in done.stdout + done.stderr, done.stderr[-3000:]
    assert scontrol, done.stdout[-3000:] + done.stderr[-3000:]
    return workdir, done, scontrol


@pytest.fixture(scope="module")
def local_run(smoke_run):
    """The same target run locally: the session's smoke run made it (tests/conftest.py), with the same config."""
    assert (smoke_run / TARGET).exists(), f"the smoke run has no {TARGET}"
    return smoke_run


def jobs_by_rule(scontrol: str) -> dict[str, list[dict]]:
    """scontrol's one line per job, as key=value fields, grouped by the rule named in the job's comment."""
    jobs: dict[str, list[dict]] = {}
    for line in scontrol.splitlines():
        fields = dict(re.findall(r"(\w[\w:/]*)=(\S*)", line))
        rule = re.search(r"rule_(\w+?)_wildcards|rule_(\w+)", fields.get("Comment", ""))
        if rule:
            jobs.setdefault(rule.group(1) or rule.group(2), []).append(fields)
    return jobs


def mebibytes(size: str) -> float:
    return float(size[:-1]) * {"M": 1, "G": 1024, "T": 1024**2}[size[-1]]


def minutes(limit: str) -> int:
    """scontrol's [days-]hours:minutes:seconds in minutes."""
    days, _, clock = limit.rpartition("-")
    hours, mins, _ = (int(x) for x in clock.split(":"))
    return int(days or 0) * 1440 + hours * 60 + mins


def test_jobs_are_submitted_with_the_profiles_resources_and_finish(slurm_run):
    _, _, scontrol = slurm_run
    profile = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    defaults = dict(item.split("=") for item in profile["default-resources"])
    jobs = jobs_by_rule(scontrol)
    assert TIMING_RULES <= set(jobs) and "prepare_dataset" in set(jobs), sorted(jobs)
    assert not {"init_weights", "sample_order"} & set(jobs), sorted(jobs)  # localrules: on the login node
    for rule, submitted in jobs.items():
        wanted = {**defaults, **{k: str(v) for k, v in profile["set-resources"].get(rule, {}).items()}}
        for job in submitted:
            assert job["JobState"] == "COMPLETED", (rule, job["JobState"], job.get("Reason"))
            assert job["Partition"] == slurm_cluster.PARTITION
            assert mebibytes(job["MinMemoryNode"]) == int(wanted["mem_mb"]), rule  # the plugin passes MB as --mem
            assert minutes(job["TimeLimit"]) == int(wanted["runtime"]), rule
            # a CPU timing job has the node to itself; no job of this CPU config asks for a GPU
            assert (job["OverSubscribe"] == "NO") == (rule in TIMING_RULES), (rule, job["OverSubscribe"])
            assert "gres/gpu" not in job.get("TRES", "") + job.get("TresPerJob", ""), (rule, job.get("TRES"))
            if rule not in TIMING_RULES:  # an --exclusive job gets every CPU of the node
                assert int(job["NumCPUs"]) == int(wanted["cpus_per_task"]), rule


def test_tables_equal_a_local_runs_in_schema_and_status(slurm_run, local_run):
    slurm_dir, _, _ = slurm_run
    on_slurm = tables.read(TABLE, slurm_dir / TARGET)
    local = tables.read(TABLE, local_run / TARGET)
    assert on_slurm.schema == local.schema
    keys = [c for c, t in local.schema.items() if t == pl.String and c not in ("run_id", "message")]
    assert on_slurm.height == local.height > 0
    assert on_slurm.select(keys).sort(keys).equals(local.select(keys).sort(keys))
    assert set(on_slurm["status"]) == {"ok"}
    env_path = TARGET.replace(".rows.parquet", ".env.parquet")
    env_slurm, env_local = (tables.read("environment", d / env_path) for d in (slurm_dir, local_run))
    assert env_slurm.schema == env_local.schema
    assert env_slurm["hostname"].to_list() == [slurm_cluster.socket.gethostname()]


def test_the_controller_accepts_a_gpu_timing_jobs_request(cluster):
    """What the plugin asks for a GPU timing job (gpu=1 from gpu_slots.smk) on a node with a GPU gres: the
    controller would start it (sbatch --test-only; this machine has no GPU to run it on)."""
    from types import SimpleNamespace

    from snakemake_executor_plugin_slurm.utils import set_gres_string

    resources = {"gpu": 1}
    job = SimpleNamespace(resources=SimpleNamespace(get=lambda key, default=None: resources.get(key, default)))
    request = set_gres_string(job).split()
    assert request == ["--gpus=1"]
    done = subprocess.run(["sbatch", "--test-only", *request, "-p", slurm_cluster.PARTITION, "-c", "8",
                           "--mem", "64000", "-t", "1440", "--wrap", "true"], env=cluster.env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "to start at" in done.stderr, done.stderr
    more = subprocess.run(["sbatch", "--test-only", "--gpus=2", "-p", slurm_cluster.PARTITION, "--wrap", "true"],
                          env=cluster.env, capture_output=True, text=True, timeout=60)
    assert more.returncode != 0  # the node has one GPU: a request it cannot meet is refused, not queued forever


def wildcard_values(job: dict) -> list[str]:
    """The job's wildcard values, from the plugin's comment rule_<rule>_wildcards_<values joined by _>."""
    _, _, values = job.get("Comment", "").partition("_wildcards_")
    return values.split("_") if values else []


def test_every_gpu_timing_job_of_a_gpu_config_gets_one_gpu_and_no_other_job_does(gpu_shaped_run):
    _, _, scontrol = gpu_shaped_run
    jobs = jobs_by_rule(scontrol)
    assert {"train_eager", "study_b_block_timing", "prepare_dataset"} <= set(jobs), sorted(jobs)
    gpu_jobs = 0
    for rule, submitted in jobs.items():
        for job in submitted:
            on_gpu = rule == "train_eager" or (rule == "study_b_block_timing" and "gpu" in wildcard_values(job))
            # requested gres/gpu:1 (TRES shows no gres without slurmdbd); a job that asks for the node's one GPU
            # GRES runs only once allocated it, and every job here ran
            asked = job.get("TresPerJob", "") + job.get("TresPerNode", "")
            assert (asked == "gres:gpu:1") == on_gpu, (rule, wildcard_values(job), asked)
            assert job["JobState"] in ("COMPLETED", "FAILED"), (rule, job["JobState"], job.get("Reason"))
            assert (job["OverSubscribe"] == "NO") == (rule in {"train_eager", "study_b_block_timing"} and not on_gpu)
            gpu_jobs += on_gpu
    assert gpu_jobs == 2  # train_eager and matmul's gpu pair
