"""Nothing serial that need not be, read from the DAG of a dry run (no job runs): the compile warm-ups (Study B's,
the sweep's) take no timing slot and a bounded share of the cores, so Study A's timing jobs run beside them, and
only a warm-up's own timing job waits for it; no compile runs beside a CPU timing job; summaries and the report
come first among ready jobs, the longest timing jobs before the other timing jobs."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from abstraction_cost.measure import gpu_slots
from abstraction_cost.study_b import compile_cache

REPO = Path(__file__).resolve().parents[1]
CORES = 16
GPUS = 2
WARM_UPS = {"compile_cache_blocks", "compile_cache_model", "compile_cache_sweep"}
STUDY_A_TIMING = set(gpu_slots.DEVICE_RULES)
STUDY_B_TIMING = set(gpu_slots.PAIR_RULES)
SUMMARIES = {"concat_training", "concat_backend_eval", "compare_backends", "concat_sweep", "sweep_h2d",
             "concat_sweep_kernels", "concat_sweep_blocks", "sweep_speedups", "concat_study_b_blocks",
             "study_b_block_speedups", "study_b_resnet50_conv_speedups", "concat_vision_table", "vision_summaries",
             "environment", "summarise_training", "report_bundle", "report", "precision", "energy", "compile_breakeven",
             "vision_oracle_curve", "conv_predictor", "concat_sweep_profile", "concat_backend_profile", "decomposition",
             "roofline"}


# Snakemake, seeing `cpus` CPUs (os.sched_getaffinity, which measure/affinity.py splits among the GPU slots)
SNAKEMAKE_ON = ("import os, sys; cpus = set(range(int(sys.argv.pop(1)))); os.sched_getaffinity = lambda pid: cpus; "
                "from snakemake.cli import main; main()")


def dry_run(config: dict, workdir: Path, gpus: int = GPUS, cpus: int = CORES) -> list[dict]:
    """Each job of a local dry run on CORES cores of a box of `cpus` CPUs and `gpus` GPUs (both fake): rule,
    inputs, outputs, wildcards, threads, priority, resources."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    # the box's GPUs are the fake ones: a CUDA_VISIBLE_DEVICES from outside (or left by an in-process test) would
    # narrow them
    env = {**{k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}, gpu_slots.FAKE_GPUS_ENV: str(gpus)}
    run = subprocess.run([sys.executable, "-c", SNAKEMAKE_ON, str(cpus), "-n", "-s", str(REPO / "Snakefile"),
                          "-d", str(workdir), "--workflow-profile", "none",
                          "--configfile", str(workdir / "config.yaml"), "--cores", str(CORES)],
                         capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    jobs = []
    for line in run.stdout.splitlines():
        if m := re.match(r"^(?:local)?rule (\w+):$", line):
            jobs.append({"rule": m.group(1), "input": [], "output": [], "wildcards": {}, "resources": {},
                         "threads": 1, "priority": 0})
        elif jobs and (m := re.match(r"^    (input|output): (.*)$", line)):
            jobs[-1][m.group(1)] = [p.strip() for p in m.group(2).split(", ")]
        elif jobs and (m := re.match(r"^    (wildcards|resources): (.*)$", line)):
            jobs[-1][m.group(1)] = dict(i.split("=", 1) for i in m.group(2).split(", ") if "=" in i)
        elif jobs and (m := re.match(r"^    (threads|priority): (\d+)$", line)):
            jobs[-1][m.group(1)] = int(m.group(2))
    return jobs


def upstream(jobs: list[dict], job: dict) -> list[dict]:
    by_output = {path: j for j in jobs for path in j["output"]}
    found, todo, seen = [], list(job["input"]), set()
    while todo:
        path = todo.pop()
        producer = by_output.get(path)
        if producer is not None and id(producer) not in seen:
            seen.add(id(producer))
            found.append(producer)
            todo += producer["input"]
    return found


def amount(job: dict, resource: str) -> int:
    return int(job["resources"].get(resource, 0))


def gpu_config():
    return yaml.safe_load((REPO / "config" / "gpu-smoke.yaml").read_text())


@pytest.fixture(scope="module")
def gpu_dag(tmp_path_factory):
    config = gpu_config()
    assert config["device"] == "cuda" and not config["study_b"]["fresh_compile_cache"]
    return dry_run(config, tmp_path_factory.mktemp("gpu-dag"))


@pytest.fixture(scope="module")
def cpu_dag(tmp_path_factory):
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    assert config["device"] == "cpu"
    return dry_run(config, tmp_path_factory.mktemp("cpu-dag"))


def test_study_a_timing_jobs_can_run_while_the_compile_warm_ups_do(gpu_dag):
    warm_ups = [j for j in gpu_dag if j["rule"] in WARM_UPS]
    study_a = [j for j in gpu_dag if j["rule"] in STUDY_A_TIMING]
    assert warm_ups and study_a
    for warm in warm_ups:
        assert amount(warm, "timing") == 0 and amount(warm, "gpu") == 0, warm["resources"]
        assert amount(warm, "compile") == 1 and warm["threads"] < CORES
    for job in study_a:   # the sweep waits for its own warm-up only (test_only_a_warm_ups_own_timing_job_waits_for_it)
        waits = {u["rule"] for u in upstream(gpu_dag, job)} & WARM_UPS
        assert waits == ({"compile_cache_sweep"} if job["rule"] == "sweep" else set()), job["output"]
        assert amount(job, "gpu") == 1 and amount(job, "timing") == 1 and amount(job, "compile") == 0


def test_a_gpu_timing_job_claims_none_of_the_cores_the_builds_share_where_its_slot_has_its_own(gpu_dag, tmp_path):
    """On a box whose CPUs measure/affinity.py splits (16: 4 per GPU slot, 8 for the rest), every GPU timing job
    asks for no thread of --cores, so builds and warm-ups filling --cores never hold a ready one back while its GPU
    stands idle; where the CPUs are too few to split, each asks for one, as it then shares them."""
    timing = [j for j in gpu_dag if j["rule"] in STUDY_A_TIMING | STUDY_B_TIMING]
    assert timing and all(amount(j, "gpu") == 1 for j in timing)
    assert all(j["threads"] == 0 for j in timing), {j["rule"]: j["threads"] for j in timing}
    assert all(j["threads"] >= 1 for j in gpu_dag if j["rule"] in WARM_UPS | {"package_aoti", "build_native"})
    config = yaml.safe_load((REPO / "config" / "gpu-smoke.yaml").read_text())
    few = [j for j in dry_run(config, tmp_path, cpus=2) if j["rule"] in STUDY_A_TIMING | STUDY_B_TIMING]
    assert few and all(j["threads"] == 1 for j in few)


def test_only_a_warm_ups_own_timing_job_waits_for_it(gpu_dag):
    timing = [j for j in gpu_dag if j["rule"] in STUDY_B_TIMING | {"sweep"}]
    waited = {}
    for job in timing:
        manifests = [p for p in job["input"] if "compile-cache-manifests" in p]
        assert len(manifests) <= 1, job["input"]
        for path in manifests:
            w = job["wildcards"]
            mine = {"study_b_block_timing": f"/blocks/{w.get('experiment')}/{w.get('pair')}-{w.get('mode')}.json",
                    "vision_model": f"/models/{w.get('pair')}/{w.get('model')}.json",
                    "sweep": f"/sweep/compile-cache-manifests/{w.get('numerics')}-shard{w.get('shard')}.json"}
            mine = mine[job["rule"]]
            assert path.endswith(mine), (job["wildcards"], path)
            waited[path] = waited.get(path, 0) + 1
    warm_outputs = [p for j in gpu_dag if j["rule"] in WARM_UPS for p in j["output"]]
    assert warm_outputs and all(waited.get(p) == 1 for p in warm_outputs)


def test_a_vision_models_warm_up_compiles_each_task_in_a_worker_of_its_own(gpu_dag):
    """A vision job is one of a run's longest and waits for its warm-up: the warm-up's threads give each of its
    tasks (the model whole, its blocks) a worker, so it lasts as long as the longer task, not as both in turn."""
    config = yaml.safe_load((REPO / "config" / "gpu-smoke.yaml").read_text())
    todo, skipped = compile_cache.tasks(config)  # a GPU box's tasks (here, without a GPU, all skipped)
    warm_ups = [j for j in gpu_dag if j["rule"] == "compile_cache_model"]
    assert warm_ups
    for warm in warm_ups:
        job = {"study": "models", "name": warm["wildcards"]["model"], "pair": warm["wildcards"]["pair"]}
        n = len(compile_cache.of_job([*todo, *skipped], job))
        workers, compile_threads, probes = compile_cache.worker_plan(n, warm["threads"])
        assert n >= 2 and workers + probes == n and compile_threads >= 1, (job, n, warm["threads"])


def test_what_timing_jobs_read_is_made_before_any_warm_up_takes_the_cores(gpu_dag):
    """Every job that makes a timing job's input (datasets, weights, C++ builds, AOTInductor packages) outranks every
    compile warm-up, so warm-ups never hold the free cores while a GPU waits for its next job's inputs (measured:
    docs/results/2026-11-26-h100x2-default-partial.md)."""
    warm = max(j["priority"] for j in gpu_dag if j["rule"] in WARM_UPS)
    timing = [j for j in gpu_dag if j["rule"] in STUDY_A_TIMING | STUDY_B_TIMING]
    makers = {id(u): u for job in timing for u in upstream(gpu_dag, job)
              if u["rule"] not in WARM_UPS | STUDY_A_TIMING | STUDY_B_TIMING}
    assert {u["rule"] for u in makers.values()} >= {"prepare_dataset", "init_weights", "package_aoti",
                                                   "package_aoti_sweep"}
    for u in makers.values():
        assert u["priority"] > warm, (u["rule"], u["priority"])


def test_warm_ups_and_summaries_go_first_and_long_jobs_before_other_timing_jobs(gpu_dag):
    by_rule = {}
    for job in gpu_dag:
        by_rule.setdefault(job["rule"], set()).add(job["priority"])
    summaries = set().union(*(by_rule[r] for r in SUMMARIES if r in by_rule))
    warm = set().union(*(by_rule[r] for r in WARM_UPS))
    timing = set().union(*(by_rule[r] for r in STUDY_A_TIMING | STUDY_B_TIMING if r in by_rule))
    assert min(summaries) > max(warm) > max(timing)
    for longest in gpu_slots.FIRST_IN_LINE:   # a run's longest jobs: started first, so neither is its tail
        assert by_rule[longest] == {max(timing)}, longest
    first = {r for r in STUDY_A_TIMING | STUDY_B_TIMING if by_rule.get(r) == {max(timing)}}
    assert first == set(gpu_slots.FIRST_IN_LINE)   # the rules the GPU slots' line lets go first
    assert max(timing) > min(by_rule["train_eager"])
    # a long job's warm-up before a short one's, so that cores short of the warm-ups delay the short jobs, not the long
    assert min(by_rule["compile_cache_model"]) > max(by_rule["compile_cache_blocks"])


def test_a_long_job_has_a_place_the_short_ones_cannot_take(gpu_dag):
    """gpu_slots.is_long: the long jobs ask for no `short_timing`, every other GPU timing job for one, of a
    total one place per GPU and one more short of `gpu`'s: however many short jobs are ready first, and with a long
    job timing on every GPU, a long one can start (and then takes the next free GPU before the short ones:
    tests/measure/test_gpu_slots.py)."""
    timing = [j for j in gpu_dag if j["rule"] in STUDY_A_TIMING | STUDY_B_TIMING and amount(j, "gpu") == 1]
    assert {j["rule"] for j in timing} >= set(gpu_slots.FIRST_IN_LINE)
    long = {(j["rule"], j["wildcards"].get("numerics")) for j in timing
            if gpu_slots.is_long(j["rule"], j["wildcards"], gpu_config())}
    # the rules of FIRST_IN_LINE, and the comparison whose every worker times algorithms as it loads
    assert long == {("vision_model", None), ("sweep", "fp32"), ("eval_backend", "cudnn-benchmark")}
    for job in timing:
        assert amount(job, "short_timing") == (0 if (job["rule"], job["wildcards"].get("numerics")) in long else 1), job
    assert gpu_slots.timing_total(GPUS) - gpu_slots.short_total(GPUS) == gpu_slots.long_places(GPUS) == GPUS + 1


def test_no_compile_warm_up_runs_beside_a_cpu_timing_job(cpu_dag):
    cpu_timing = [j for j in cpu_dag if j["rule"] in STUDY_A_TIMING | STUDY_B_TIMING and amount(j, "gpu") == 0]
    warm_ups = [j for j in cpu_dag if j["rule"] in WARM_UPS]
    assert cpu_timing and warm_ups
    for job in cpu_timing:  # every unit of `compile`: a warm-up's one does not fit beside it
        assert amount(job, "compile") == CORES and amount(job, "timing") == gpu_slots.timing_total(GPUS)
        assert job["threads"] == 1


def test_on_a_box_without_a_gpu_jobs_that_can_only_say_not_run_take_no_timing_slot(tmp_path):
    """The default config on a CPU machine: every timing job needs a GPU (require_gpu), so none keeps the box to
    itself and they run side by side, and none has a compile warm-up; a CPU-pair job that does measure
    (require_gpu false) still runs alone, after its warm-up."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    assert config["device"] == "auto"
    jobs = dry_run(config, tmp_path / "default", gpus=0)
    timing = [j for j in jobs if j["rule"] in STUDY_A_TIMING | STUDY_B_TIMING]
    assert {j["rule"] for j in timing} >= {"vision_model", "study_b_block_timing", "sweep", "eval_backend"}
    for job in timing:
        assert (amount(job, "timing"), amount(job, "compile"), amount(job, "gpu")) == (0, 0, 0), job
    assert not [j for j in jobs if j["rule"] in WARM_UPS]   # nothing will compile: no warm-up runs

    config["study_b"]["models"]["require_gpu"] = False
    jobs = dry_run(config, tmp_path / "cpu-pair", gpus=0)
    vision = {j["wildcards"]["pair"]: j for j in jobs if j["rule"] == "vision_model"
              and j["wildcards"]["model"] == "resnet50"}
    assert (amount(vision["cpu"], "timing"), amount(vision["cpu"], "compile")) == (gpu_slots.timing_total(0), CORES)
    assert (amount(vision["gpu"], "timing"), amount(vision["gpu"], "compile")) == (0, 0)
    warm_ups = [j["wildcards"] for j in jobs if j["rule"] == "compile_cache_model"]
    assert warm_ups == [{"pair": "cpu", "model": "resnet50"}]


@pytest.mark.parametrize("on", [True, False], ids=["cpu_beside", "alone"])
def test_with_cpu_beside_a_cpu_timing_job_takes_the_cpu_slot_and_leaves_the_gpu_slots_and_warm_ups_running(
        on, tmp_path):
    """The default config (its cpu pair: ResNet-50 and matmul) on two GPUs. gpus.cpu_beside: a timing job on the
    CPU asks for the one `cpu_slot` (so one at a time) and no `timing` or `compile` unit, so the GPU slots' jobs
    and the warm-ups go on beside it; without it, it keeps the box."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["gpus"] = {**config["gpus"], "cpu_beside": on}
    jobs = dry_run(config, tmp_path / "dag")
    timing = [j for j in jobs if j["rule"] in STUDY_A_TIMING | STUDY_B_TIMING]
    cpu_timing = [j for j in timing if amount(j, "gpu") == 0]
    assert cpu_timing and len(cpu_timing) < len(timing)
    for job in cpu_timing:
        assert amount(job, "cpu_slot") == int(on), job["resources"]
        assert (amount(job, "timing"), amount(job, "compile")) == ((0, 0) if on else (
            gpu_slots.timing_total(GPUS), CORES)), job["resources"]
    assert all(amount(j, "cpu_slot") == 0 for j in timing if amount(j, "gpu") == 1)
