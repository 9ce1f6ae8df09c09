"""A config change reruns exactly what it changes: every measuring and summarising rule carries the config its
jobs read as a param (common.smk's reads), and params are a rerun trigger. A smoke-config run is recorded with
`--touch` (every job's metadata, no job's work); then one key of each study section is changed in turn, and the
dry run must rerun exactly the jobs that read it and the jobs downstream of them."""
import copy
import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.fixtures.repository import own_native_build

REPO = Path(__file__).resolve().parents[2]

# (dotted key, new value, the rules whose jobs read it, a path part that narrows those jobs or None)
CHANGES = [
    ("study_a.training.optimizer.lr", 0.02, {"train_eager", "train_libtorch", "train_cudnn"}, None),
    ("study_a.backends.batch_size", 3, {"backend_eval_input", "package_aoti", "eval_backend", "flops"}, None),
    ("study_a.backends.logit_tolerance", 1.0e-3, {"compare_backends"}, None),
    ("study_a.sweep.batches", [2, 4], {"sweep", "flops"}, None),  # the kernel point (batch 2) stays in the grid
    ("study_a.sweep.kernels.top", 6, {"concat_sweep_kernels"}, None),  # the sweep ranks every kernel of its point
    ("study_a.sweep.kernels.batch_size", 1, {"sweep"}, None),
    ("study_b.blocks.matmul.sizes", {"cpu": [32, 64], "gpu": [1024]}, {"study_b_block_timing", "compile_cache_blocks"},
     "/matmul/"),
    ("study_b.blocks.bootstrap.resamples", 300, {"study_b_block_speedups", "study_b_resnet50_conv_speedups"}, None),
    ("study_b.models.resolution", 96, {"vision_model", "compile_cache_model", "flops"}, None),
    ("study_b.models.bootstrap.resamples", 300, {"vision_summaries"}, None),
]


def snakemake(work: Path, config: Path, *args: str) -> str:
    env = own_native_build(work)
    run = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(work),
                          "--workflow-profile", "none", "--configfile", str(config), "--cores", "2", *args],
                         capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    return run.stdout


def jobs_of(dry_run: str) -> dict[str, dict]:
    """A dry run's jobs by name (their first output, or their rule for a target rule): rule, inputs, outputs."""
    jobs, job = {}, None
    for line in dry_run.splitlines():
        if m := re.match(r"^(?:local)?rule (\w+):$", line):
            job = {"rule": m.group(1), "input": [], "output": []}
            jobs[m.group(1)] = job  # renamed once its output is read
        elif job is not None and (m := re.match(r"^    (input|output): (.*)$", line)):
            job[m.group(1)] = [p.strip() for p in m.group(2).split(", ")]
            if m.group(1) == "output":
                jobs.pop(job["rule"], None)
                jobs[job["output"][0]] = job
        elif not line.startswith("    "):
            job = None
    return jobs


def downstream(jobs: dict[str, dict], start: set[str]) -> set[str]:
    by_output = {path: name for name, job in jobs.items() for path in job["output"]}
    users = {}
    for name, job in jobs.items():
        for path in job["input"]:
            if path in by_output:
                users.setdefault(by_output[path], set()).add(name)
    found, todo = set(start), list(start)
    while todo:
        for user in users.get(todo.pop(), ()):
            if user not in found:
                found.add(user)
                todo.append(user)
    return found


def directory_rules() -> set[str]:
    """Rules whose output is a directory(): their outputs are made as folders."""
    found = set()
    for path in (REPO / "workflow" / "rules").glob("*.smk"):
        for block in re.split(r"^(?=rule )", path.read_text(), flags=re.M):
            if (m := re.match(r"rule (\w+):", block)) and "directory(" in block:
                found.add(m.group(1))
    return found


def set_key(config: dict, key: str, value) -> dict:
    changed = copy.deepcopy(config)
    *path, last = key.split(".")
    section = changed
    for part in path:
        section = section[part]
    assert last in section, f"{key} is not in config/smoke.yaml"
    assert section[last] != value, f"{key} is already {value!r}"
    section[last] = value
    return changed


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A working directory in which every smoke job's outputs exist and their metadata is recorded; the DAG."""
    work = tmp_path_factory.mktemp("config-change")
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    jobs = jobs_of(snakemake(work, work / "config.yaml", "-n"))
    folders = directory_rules()
    for job in jobs.values():
        for path in job["output"]:
            target = work / path   # the C++ programs' absolute paths are in work too
            if job["rule"] in folders:
                target.mkdir(parents=True, exist_ok=True)
                if job["rule"] == "prepare_dataset":   # a manifest, so the start's damage check passes it
                    (target / "manifest.json").write_text(json.dumps(
                        {"status": "missing", "dataset": target.name, "message": "a stand-in of this test"}))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.touch()
    snakemake(work, work / "config.yaml", "--touch", "--forceall")
    return work, config, jobs


def rerun(work: Path, config_path: Path) -> set[str]:
    """The jobs a dry run would run."""
    return set(jobs_of(snakemake(work, config_path, "-n")))


def test_the_recorded_run_reruns_nothing_under_its_own_config(recorded):
    work, _, jobs = recorded
    assert rerun(work, work / "config.yaml") == set()


def test_changing_one_key_of_each_study_section_reruns_exactly_the_jobs_that_read_it(recorded):
    work, config, jobs = recorded

    def rerun_by(change):
        key, value, _, _ = change
        path = work / f"{key}.yaml"
        path.write_text(yaml.safe_dump(set_key(config, key, value)))
        return rerun(work, path)

    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(rerun_by, CHANGES))
    wrong = []
    for (key, _, rules, part), found in zip(CHANGES, results):
        readers = {name for name, job in jobs.items()
                   if job["rule"] in rules and (part is None or any(part in p for p in job["output"]))}
        assert {jobs[name]["rule"] for name in readers} == rules, f"{key}: no job of {rules} in the DAG"
        expected = downstream(jobs, readers)
        if found != expected:
            wrong.append(f"{key}: reran {sorted(found - expected)[:5]} beyond, and not {sorted(expected - found)[:5]}")
    assert not wrong, "\n".join(wrong)
