"""What each job asks SLURM for under profiles/slurm, read from dry runs (no cluster needed; tests/test_slurm.py
submits to a real one): a GPU config's timing jobs one GPU each, a CPU config no GPU anywhere (the profile's
overrides included), jobs of seconds on the login node, and the job counts docs/running.md states
(`device: auto` on a cluster: tests/faults/test_cluster_device.py)."""
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from abstraction_cost.measure import gpu_slots

from tests.fixtures.repository import own_native_build

REPO = Path(__file__).resolve().parents[1]
TIMING_RULES = set(gpu_slots.DEVICE_RULES) | set(gpu_slots.PAIR_RULES)
# rules whose jobs take seconds (or want the login node's network): localrules
LOCAL_RULES = {"download_dataset", "init_weights", "sample_order", "concat_training", "backend_eval_input",
               "concat_backend_eval", "compare_backends", "concat_sweep", "sweep_h2d", "concat_sweep_kernels",
               "concat_sweep_blocks", "sweep_speedups", "concat_study_b_blocks", "study_b_block_speedups",
               "study_b_resnet50_conv_speedups", "concat_vision_table", "vision_summaries", "environment",
               "summarise_training", "report_bundle", "report", "all", "study_b_blocks", "vision_models", "precision",
               "energy", "compile_breakeven", "vision_oracle_curve", "conv_predictor", "concat_sweep_profile",
               "concat_backend_profile", "decomposition",
               "roofline"}


def with_device(name: str, device: str, tmp_path: Path) -> Path:
    config = yaml.safe_load((REPO / "config" / f"{name}.yaml").read_text())
    config["device"] = device
    path = tmp_path / f"{name}-{device}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def slurm_dry_run(config: Path, workdir: Path, **env: str) -> subprocess.CompletedProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "-s", str(REPO / "Snakefile"), "-d", str(workdir),
                           "--workflow-profile", str(REPO / "profiles" / "slurm"), "--configfile", str(config)],
                          capture_output=True, text=True, timeout=600,
                          # a build folder of its own: the C++ builds are counted whether or not this checkout built them
                          env={**own_native_build(workdir), **env})


def jobs_of(dry_run: str) -> list[dict]:
    """Each job of a dry run: rule, wildcards and resources, and whether its rule is a localrule."""
    jobs = []
    local = declared_localrules()
    for line in dry_run.splitlines():
        if m := re.match(r"^(?:local)?rule (\w+):$", line):
            jobs.append({"rule": m.group(1), "local": m.group(1) in local, "wildcards": {}, "resources": {},
                         "threads": 1})
        elif jobs and (m := re.match(r"^    (wildcards|resources): (.*)$", line)):
            jobs[-1][m.group(1)] = dict(item.split("=", 1) for item in m.group(2).split(", ") if "=" in item)
        elif jobs and (m := re.match(r"^    threads: (\d+)$", line)):
            jobs[-1]["threads"] = int(m.group(1))
    return jobs


def declared_localrules() -> set[str]:
    """Every rule named by a `localrules:` directive of the Snakefile or a rules file (Snakemake itself refuses a
    name that is no rule); a dry run does not say which jobs would run locally."""
    names = set()
    for path in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]:
        for m in re.finditer(r"^\s*localrules:\s*([\w, ]+)", path.read_text(), re.M):
            names.update(n.strip() for n in m.group(1).split(",") if n.strip())
    return names


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slurm-requests")
    configs = {"smoke-cuda": with_device("smoke", "cuda", tmp), "smoke-cpu": with_device("smoke", "cpu", tmp),
               "paper-cuda": with_device("paper", "cuda", tmp)}
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(zip(configs, pool.map(lambda n: slurm_dry_run(configs[n], tmp / n), configs)))
    for name, run in runs.items():
        assert run.returncode == 0, f"{name}: {(run.stdout + run.stderr)[-3000:]}"
    return runs


def test_a_gpu_configs_timing_jobs_each_ask_slurm_for_one_gpu(dry_runs):
    jobs = jobs_of(dry_runs["smoke-cuda"].stdout)
    timing = [j for j in jobs if j["rule"] in TIMING_RULES]
    assert {j["rule"] for j in timing} >= {"train_eager", "eval_backend", "sweep", "study_b_block_timing"}
    for job in timing:
        on_gpu = job["rule"] in gpu_slots.DEVICE_RULES or job["wildcards"]["pair"] == "gpu"
        assert job["resources"].get("gpu") == ("1" if on_gpu else "0"), job
        assert ("--exclusive" in job["resources"].get("slurm_extra", "")) == (not on_gpu), job
        assert job["threads"] >= 1, job   # its --cpus-per-task: no local slot's own cores on a cluster


def test_a_cpu_config_asks_slurm_for_no_gpu_anywhere(dry_runs):
    jobs = jobs_of(dry_runs["smoke-cpu"].stdout)
    assert any(j["rule"] == "train_cudnn" for j in jobs)  # the rule the profile once gave a GPU of its own
    asking = [(j["rule"], j["wildcards"]) for j in jobs if j["resources"].get("gpu", "0") != "0"]
    assert asking == []
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    assert not any("gpu" in resources for resources in profile["set-resources"].values())


def test_jobs_of_seconds_run_on_the_login_node_and_no_timing_job_does(dry_runs):
    assert declared_localrules() == LOCAL_RULES
    assert not LOCAL_RULES & TIMING_RULES
    ruled = {j["rule"] for name in ("smoke-cuda", "paper-cuda") for j in jobs_of(dry_runs[name].stdout)}
    assert LOCAL_RULES - {"study_b_blocks", "vision_models"} <= ruled  # targets of their own, not in `all`


def counts(jobs: list[dict], rule: str, **wildcards: str) -> int:
    return sum(1 for j in jobs if j["rule"] == rule and all(j["wildcards"].get(k) == v for k, v in wildcards.items()))


def test_the_job_counts_docs_running_md_states_are_the_paper_configs(dry_runs):
    jobs = jobs_of(dry_runs["paper-cuda"].stdout)
    doc = (REPO / "docs" / "running.md").read_text()
    total, cluster = len(jobs), sum(not j["local"] for j in jobs)
    stated = re.search(r"`config/paper.yaml` is (\d+) jobs, (\d+) of them cluster jobs", doc)
    assert stated, "docs/running.md no longer states paper.yaml's job counts"
    assert (int(stated.group(1)), int(stated.group(2))) == (total, cluster)
    rows = {
        "`train_eager`, `train_libtorch`, `train_cudnn`": f"{counts(jobs, 'train_eager')} each",
        "`study_b_block_timing`": f"{counts(jobs, 'study_b_block_timing')}",
        "`vision_model`": f"{counts(jobs, 'vision_model')}",
        "`eval_backend`": f"{counts(jobs, 'eval_backend')}",
        "`sweep`": f"{counts(jobs, 'sweep')}",
        "`sweep_kernels_job`": f"{counts(jobs, 'sweep_kernels_job')}",
    }
    assert counts(jobs, "train_eager") == counts(jobs, "train_libtorch") == counts(jobs, "train_cudnn")
    for rule, number in rows.items():
        assert f"| {rule} | {number} |" in doc, f"docs/running.md: the row of {rule} should say {number}"
    for rule in ("study_b_block_timing", "vision_model"):
        gpu, cpu = counts(jobs, rule, pair="gpu"), counts(jobs, rule, pair="cpu")
        row = next(line for line in doc.splitlines() if line.startswith(f"| `{rule}` |"))
        assert f"{gpu} GPU, {cpu} whole CPU nodes" in row, f"docs/running.md: {rule}'s split should be {gpu}/{cpu}"
