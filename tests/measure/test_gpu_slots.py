"""GPU slots (measure/gpu_slots.py, workflow/rules/gpu_slots.smk): on fake GPUs on the CPU, and on NVML's real ones."""
import copy
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from abstraction_cost.measure import gpu_slots
from tests.fixtures.repository import REPO

SNAKEMAKE = Path(sys.executable).with_name("snakemake")


@pytest.fixture(autouse=True)
def slot_state(tmp_path, monkeypatch):
    """Locks in a folder of the test's own, no slot held, and no CUDA_VISIBLE_DEVICES from outside."""
    lock_dir = tmp_path / "locks"
    monkeypatch.setattr(gpu_slots, "LOCK_DIR", lock_dir)
    monkeypatch.setenv("ABSTRACTION_COST_GPU_LOCK_DIR", str(lock_dir))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")   # recorded, so that what take() sets is undone after the test
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(gpu_slots, "_held", None)
    yield lock_dir
    if gpu_slots._held is not None:
        os.close(gpu_slots._held.fd)


def fake_gpus(monkeypatch, n):
    monkeypatch.setenv(gpu_slots.FAKE_GPUS_ENV, str(n))


def job(rule, config, **wildcards):
    return SimpleNamespace(rule=rule, config=config, wildcards=SimpleNamespace(items=lambda: wildcards.items()))


# What a backend comparison's job reads to know whether it is long (gpu_slots.is_long)
COMPARISON = {"backend_flags": {"tf32": False, "cudnn_benchmark": False},
              "study_a": {"backends": {"implementations": ["eager", "libtorch", "cudnn"]},
                          "cudnn": {"algo": "heuristic"}}}


@pytest.mark.parametrize("rule, wildcards, change, long", [
    ("sweep", {"numerics": "fp32", "shard": "0"}, {}, True),
    ("vision_model", {"pair": "gpu", "model": "alexnet"}, {}, True),
    ("train_eager", {"dataset": "synthetic-voc2012"}, {}, False),
    ("eval_backend", {"numerics": "fp32"}, {}, False),
    ("eval_backend", {"numerics": "tf32"}, {}, False),
    ("eval_backend", {"numerics": "cudnn-benchmark"}, {}, True),   # every worker searches as it loads, one at a time
    ("eval_backend", {"numerics": "fp32"}, {"cudnn_benchmark": True}, True),   # the flag on for every numerics
    ("eval_backend", {"numerics": "fp32"}, {"algo": "find"}, False),   # cudnnFind: the cuDNN worker alone searches
])
def test_a_long_job_is_one_of_the_rules_first_in_line_or_a_comparison_whose_every_worker_loads_alone(
        rule, wildcards, change, long):
    config = copy.deepcopy(COMPARISON)
    config["backend_flags"]["cudnn_benchmark"] = change.get("cudnn_benchmark", False)
    config["study_a"]["cudnn"]["algo"] = change.get("algo", "heuristic")
    assert gpu_slots.is_long(rule, wildcards, config) is long


def test_visible_gpus_are_narrowed_by_an_outer_cuda_visible_devices(monkeypatch):
    fake_gpus(monkeypatch, 4)
    assert [g.index for g in gpu_slots.visible_gpus()] == [0, 1, 2, 3]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    assert [g.index for g in gpu_slots.visible_gpus()] == [1, 3]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-fake-2")
    assert [g.index for g in gpu_slots.visible_gpus()] == [2]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_slots.visible_gpus() == []


def test_slots_default_to_every_gpu_and_obey_the_limit(monkeypatch):
    fake_gpus(monkeypatch, 3)
    assert gpu_slots.slots({"device": "cuda"}) == 3
    assert gpu_slots.slots({"device": "cuda", "gpus": {"slots": None}}) == 3
    assert gpu_slots.slots({"device": "cuda", "gpus": {"slots": 2}}) == 2
    assert gpu_slots.slots({"device": "auto", "gpus": {"slots": 0}}) == 0  # auto: time on the CPU


def test_more_slots_than_gpus_names_the_setting(monkeypatch):
    fake_gpus(monkeypatch, 2)
    with pytest.raises(gpu_slots.GpuSlotsError, match=r"'gpus.slots' is 3 but this machine has 2 GPU"):
        gpu_slots.slots({"device": "auto", "gpus": {"slots": 3}})


def test_no_slots_on_a_gpu_config_names_the_setting(monkeypatch):
    fake_gpus(monkeypatch, 2)
    with pytest.raises(gpu_slots.GpuSlotsError, match=r"'gpus.slots' is 0 but config key 'device' is 'cuda'"):
        gpu_slots.slots({"device": "cuda", "gpus": {"slots": 0}})


def test_which_timing_jobs_are_on_the_gpu():
    assert gpu_slots.on_gpu("vision_model", {"pair": "gpu"}, {"device": "auto"}, 2)
    assert not gpu_slots.on_gpu("vision_model", {"pair": "cpu"}, {"device": "cuda"}, 2)
    assert not gpu_slots.on_gpu("vision_model", {"pair": "gpu"}, {"device": "cpu"}, None)  # not_run, no GPU
    assert not gpu_slots.on_gpu("study_b_block_timing", {"pair": "gpu"}, {"device": "auto"}, 0)
    assert gpu_slots.on_gpu("study_b_block_timing", {"pair": "gpu"}, {"device": "auto"}, None)  # a cluster
    assert gpu_slots.on_gpu("eval_backend", {}, {"device": "auto"}, 1)
    assert not gpu_slots.on_gpu("eval_backend", {}, {"device": "auto"}, 0)
    assert not gpu_slots.on_gpu("eval_backend", {}, {"device": "auto"}, None)  # cluster, auto: no GPU asked
    assert gpu_slots.on_gpu("train_eager", {}, {"device": "cuda"}, None)
    assert not gpu_slots.on_gpu("train_libtorch", {}, {"device": "cpu"}, 4)
    with pytest.raises(KeyError, match="not a timing rule"):
        gpu_slots.on_gpu("report", {}, {"device": "auto"}, 1)


def test_gpu_slots_have_cores_of_their_own_only_where_affinity_splits_the_box():
    """What gpu_slots.smk's timing_threads reads: with cores of its own a GPU timing job claims none of --cores."""
    assert gpu_slots.slots_have_own_cores(1, False, cpus=range(16))
    assert gpu_slots.slots_have_own_cores(2, True, cpus=range(32))
    assert not gpu_slots.slots_have_own_cores(1, False, cpus=range(3))   # too few for a slot and the rest
    assert not gpu_slots.slots_have_own_cores(8, False, cpus=range(16))  # one core per slot
    assert not gpu_slots.slots_have_own_cores(0, False, cpus=range(16))
    assert not gpu_slots.slots_have_own_cores(None, False, cpus=range(16))  # a cluster's login node


def test_every_timing_rule_names_its_comparison():
    assert set(gpu_slots.COMPARISON_WILDCARDS) == {*gpu_slots.DEVICE_RULES, *gpu_slots.PAIR_RULES}
    eager = gpu_slots.comparison_key("train_eager", {"dataset": "digits", "init": "zero-gamma", "seed": 0})
    assert eager == gpu_slots.comparison_key("train_libtorch", {"dataset": "digits", "init": "zero-gamma", "seed": 0})
    assert eager != gpu_slots.comparison_key("train_eager", {"dataset": "digits", "init": "zero-gamma", "seed": 1})
    # the sweep's numerics are compared with each other (tf32 against fp32): one comparison, one pinned GPU
    fp32, tf32 = ({"numerics": n, "implementation": "eager"} for n in ("fp32", "tf32"))
    assert gpu_slots.comparison_key("sweep", fp32) == gpu_slots.comparison_key("sweep", tf32)
    assert gpu_slots.comparison_key("sweep_kernels_job", fp32) == gpu_slots.comparison_key("sweep_kernels_job", tf32)


def test_take_locks_a_free_gpu_and_the_next_job_gets_another(monkeypatch, slot_state):
    fake_gpus(monkeypatch, 2)
    config = {"device": "auto"}
    first = gpu_slots.take(job("eval_backend", config, implementation="eager"))
    assert first.gpu.index == 0 and gpu_slots.held() is first
    assert gpu_slots.environment_columns() == {"gpu_index": 0, "gpu_slot_wait_s": first.wait_s,
                                               "gpu_slot_taken_at": first.taken_at}
    assert first.taken_at.endswith("+00:00")
    assert gpu_slots.held_fds() == (first.fd,)
    # another job (process) sees GPU 0 taken
    other = gpu_slots.acquire(gpu_slots.visible_gpus(), "other")
    assert other.gpu.index == 1
    os.close(other.fd)


def test_a_cpu_job_takes_no_slot(monkeypatch):
    fake_gpus(monkeypatch, 2)
    assert gpu_slots.take(job("vision_model", {"device": "auto"}, pair="cpu", model="alexnet")) is None
    assert gpu_slots.environment_columns() == {"gpu_index": None, "gpu_slot_wait_s": None,
                                               "gpu_slot_taken_at": None}


def test_zero_slots_on_auto_hides_the_gpus(monkeypatch):
    fake_gpus(monkeypatch, 2)
    config = {"device": "auto", "gpus": {"slots": 0}}
    assert gpu_slots.take(job("train_eager", config, dataset="digits", init="zero-gamma", seed=0)) is None
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""


def test_take_refuses_once_cuda_is_initialised(monkeypatch):
    fake_gpus(monkeypatch, 1)
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=SimpleNamespace(is_initialized=lambda: True)))
    with pytest.raises(RuntimeError, match="before any CUDA call"):
        gpu_slots.take(job("eval_backend", {"device": "cuda"}, implementation="eager"))


def test_pin_comparisons_puts_one_comparison_on_one_gpu(monkeypatch, slot_state):
    fake_gpus(monkeypatch, 4)
    config = {"device": "cuda", "gpus": {"pin_comparisons": True}}
    wildcards = {"dataset": "digits", "init": "zero-gamma", "seed": 3}
    pinned = gpu_slots.pinned_gpu(gpu_slots.comparison_key("train_eager", wildcards), gpu_slots.visible_gpus())
    slot = gpu_slots.take(job("train_libtorch", config, **wildcards))
    assert slot.gpu == pinned
    # the pin holds whichever GPUs are free: with the pinned one taken, a job of the same comparison waits
    monkeypatch.setattr(gpu_slots, "_held", None)
    monkeypatch.setattr(gpu_slots, "POLL_S", 0.05)
    waiter = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from types import SimpleNamespace
        from abstraction_cost.measure import gpu_slots
        w = {wildcards!r}
        s = gpu_slots.take(SimpleNamespace(rule="train_eager", config={config!r},
                                           wildcards=SimpleNamespace(items=lambda: w.items())))
        print(s.gpu.index, s.wait_s)
    """)], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    time.sleep(1.5)
    assert waiter.poll() is None, "a job of the same comparison ran on another GPU instead of waiting"
    os.close(slot.fd)
    out, _ = waiter.communicate(timeout=30)
    index, wait_s = out.split()
    assert int(index) == pinned.index and float(wait_s) >= 1.0


HOLDER = textwrap.dedent("""
    import sys, time
    from abstraction_cost.measure import gpu_slots
    slot = gpu_slots.acquire(gpu_slots.visible_gpus()[:1], "holder")
    print(slot.gpu.index, flush=True)
    time.sleep(600)
""")


def test_a_killed_job_frees_its_slot(monkeypatch, slot_state):
    fake_gpus(monkeypatch, 1)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    try:
        assert holder.stdout.readline().strip() == "0"
        assert gpu_slots._try_lock(gpu_slots.visible_gpus()[0], "probe") is None  # held by the other job
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        slot = gpu_slots.acquire(gpu_slots.visible_gpus(), "next job")  # would wait forever if not freed
        assert slot.gpu.index == 0 and slot.wait_s < 5
        os.close(slot.fd)
    finally:
        holder.kill()


def test_a_launched_program_holds_the_slot_after_its_job_dies(monkeypatch, slot_state):
    """native.launch passes held_fds() to the C++ program: killing the Python job leaves the GPU locked until the
    program (here `sleep`) ends."""
    fake_gpus(monkeypatch, 1)
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import subprocess, sys
        from types import SimpleNamespace
        from abstraction_cost.measure import gpu_slots
        gpu_slots.take(SimpleNamespace(rule="eval_backend", config={"device": "cuda"},
                                       wildcards=SimpleNamespace(items=lambda: {}.items())))
        child = subprocess.Popen(["sleep", "3"], pass_fds=gpu_slots.held_fds())
        print(child.pid, flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    parent.stdout.readline()
    parent.kill()
    parent.wait(timeout=10)
    gpu = gpu_slots.visible_gpus()[0]
    assert gpu_slots._try_lock(gpu, "probe") is None  # the program still holds it
    slot = gpu_slots.acquire([gpu], "next job")
    assert slot.wait_s > 0.5
    os.close(slot.fd)


def test_a_job_gives_its_slot_back_as_its_script_ends_unless_a_process_it_started_holds_it(monkeypatch, slot_state,
                                                                                              caplog):
    """release(): the lock freed for the next job and the job off the slot's cores, but not while a program the
    job launched (here `sleep`, given the lock as native.launch gives it) still runs: it may use the GPU."""
    fake_gpus(monkeypatch, 1)
    left = []
    monkeypatch.setattr(gpu_slots.affinity, "pin_timing", lambda *args, **kw: None)
    monkeypatch.setattr(gpu_slots.affinity, "leave_slot", lambda: left.append(True))
    gpu_slots.release()   # no slot: nothing to give back
    assert left == []
    gpu = gpu_slots.visible_gpus()[0]
    gpu_slots.take(job("eval_backend", {"device": "cuda", **COMPARISON}, numerics="fp32"))
    program = subprocess.Popen(["sleep", "30"], pass_fds=gpu_slots.held_fds())
    try:
        gpu_slots.release(logging.getLogger("job"))
        assert gpu_slots.held() is not None and gpu_slots._try_lock(gpu, "next job") is None and left == []
        assert f"processes [{program.pid}] it started still hold its lock" in caplog.text
    finally:
        program.kill()
        program.wait()
    gpu_slots.release()
    assert gpu_slots.held() is None and gpu_slots.held_fds() == () and left == [True]
    slot = gpu_slots.try_acquire([gpu], "next job")
    assert slot is not None
    os.close(slot.fd)


def test_every_timing_script_stages_takes_and_last_gives_its_slot_back():
    """A timing rule's script that took its slot and never gave it back would hold the GPU through its exit; one
    that gave it back before its last statement could time on a GPU it no longer holds."""
    import ast
    import re
    scripts = {}
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        parts = re.split(r"^[ \t]*rule (\w+):", smk.read_text(), flags=re.M)   # text, name, body, name, body...
        for rule, body in zip(parts[1::2], parts[2::2]):
            found = re.search(r'script:\s*"([^"]+)"', body)
            if gpu_slots.is_timing_rule(rule) and found:
                scripts[rule] = (smk.parent / found.group(1)).resolve()
    assert set(scripts) == set(gpu_slots.DEVICE_RULES) | set(gpu_slots.PAIR_RULES)
    for rule, path in scripts.items():
        calls = [f"{n.value.func.attr}" for n in ast.parse(path.read_text()).body
                 if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
                 and isinstance(n.value.func, ast.Attribute) and getattr(n.value.func.value, "id", "") == "gpu_slots"]
        assert calls == ["stage", "take", "release"], (rule, path.name, calls)
        last = ast.parse(path.read_text()).body[-1]
        assert ast.unparse(last).startswith("gpu_slots.release("), (rule, path.name)


def in_line(gpus: list, lock_dir: Path, folder: str = gpu_slots.LINE) -> subprocess.Popen:
    """A long job in the line for `gpus` (or a job with a place in another folder: gpu_slots.WAITING), in a
    process of its own (a flock is per open file: another process's is what a short job sees)."""
    code = ("import sys, time; from abstraction_cost.measure import gpu_slots as g; "
            f"g._enter({folder!r}, [g.Gpu(i, f'GPU-fake-{{i}}') for i in {gpus}], 'sweep[numerics=fp32]'); "
            "print('in line', flush=True); time.sleep(60)")
    long_job = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(REPO / "src"),
                                     "ABSTRACTION_COST_GPU_LOCK_DIR": str(lock_dir)})
    assert long_job.stdout.readline().strip() == "in line"
    return long_job


def test_a_short_job_leaves_a_free_gpu_to_a_long_job_in_line_until_it_leaves_or_dies(monkeypatch, slot_state):
    fake_gpus(monkeypatch, 2)
    gpus = gpu_slots.visible_gpus()
    long_job = in_line([0], slot_state)
    try:
        assert gpu_slots.long_job_waiting(gpus[:1]) and gpu_slots.long_job_waiting(gpus)
        assert not gpu_slots.long_job_waiting(gpus[1:])   # it waits for GPU 0 only: GPU 1 is the short job's
        other = gpu_slots.acquire(gpus[1:], "eval_backend[numerics=fp32]", after_long=True)
        assert other.gpu.index == 1 and other.wait_s < 1
        os.close(other.fd)
        taken = []
        waiting = threading.Thread(target=lambda: taken.append(
            gpu_slots.acquire(gpus[:1], "eval_backend[numerics=tf32]", after_long=True)))
        waiting.start()
        time.sleep(1.0)
        assert not taken   # GPU 0 is free, and left to the long job
    finally:
        long_job.kill()
        long_job.wait()
    waiting.join(timeout=10)
    assert taken and taken[0].gpu.index == 0 and taken[0].wait_s >= 1.0
    os.close(taken[0].fd)
    assert not [p for p in (slot_state / "first-in-line").iterdir() if not p.name.startswith(".")]  # its place gone


def test_a_long_job_leaves_the_line_when_it_takes_its_gpu(monkeypatch, slot_state):
    fake_gpus(monkeypatch, 1)
    for pin in ("pin_other", "pin_timing"):   # this test's own process: its cores stay as they are
        monkeypatch.setattr(gpu_slots.affinity, pin, lambda *args, **kwargs: None)
    sweep = job("sweep", {"device": "auto"}, numerics="fp32", shard="0")
    gpu_slots.stage(sweep)
    assert [p.name for p in (slot_state / "first-in-line").iterdir()] == [str(os.getpid())]
    assert not gpu_slots.long_job_waiting(gpu_slots.visible_gpus())   # not in its own way
    assert gpu_slots.take(sweep).gpu.index == 0
    assert list((slot_state / "first-in-line").iterdir()) == [] and gpu_slots._in_line is None


def test_with_take_free_slot_at_start_a_job_takes_a_free_gpu_as_it_starts_and_imports_on_its_cores(
        monkeypatch, slot_state):
    """gpus.take_free_slot_at_start: stage() locks a GPU that no job holds and pins the job to that slot's cores
    before its imports, and take() then returns that slot at once; a held GPU, one a long job in the line waits
    for, or the key off leave stage() as it was (imports on the cores no slot has, the slot taken after them)."""
    fake_gpus(monkeypatch, 2)
    pinned = []
    monkeypatch.setattr(gpu_slots.affinity, "pin_other", lambda *args: pinned.append("other"))
    monkeypatch.setattr(gpu_slots.affinity, "pin_timing", lambda index, *args, **kw: pinned.append(index))
    gpus = gpu_slots.visible_gpus()
    on = {"device": "auto", "gpus": {"take_free_slot_at_start": True}, **COMPARISON}
    eval_job = job("eval_backend", on, numerics="fp32")
    gpu_slots.stage(job("eval_backend", {"device": "auto", **COMPARISON}, numerics="fp32"))   # the key off
    assert gpu_slots.held() is None and pinned == ["other"]
    gpu_slots.stage(eval_job)
    slot = gpu_slots.held()
    assert slot is not None and slot.gpu.index == 0 and pinned == ["other", "other", 0]
    assert gpu_slots.try_acquire(gpus[:1], "another job") is None   # locked from the job's start
    assert gpu_slots.take(eval_job) is slot and pinned == ["other", "other", 0]   # nothing more to wait for
    assert gpu_slots.environment_columns()["gpu_slot_taken_at"] == slot.taken_at
    os.close(slot.fd)
    monkeypatch.setattr(gpu_slots, "_held", None)
    # both GPUs held by other jobs: staged as without the key
    others = [gpu_slots.try_acquire([g], "another job") for g in gpus]
    gpu_slots.stage(eval_job)
    assert gpu_slots.held() is None and pinned[-1] == "other"
    for other in others:
        os.close(other.fd)
    # a long job in the line waits for GPU 0 and GPU 1 is held: a short job leaves GPU 0 free as it starts
    held = gpu_slots.try_acquire(gpus[1:], "another job")
    long_job = in_line([0], slot_state)
    try:
        gpu_slots.stage(eval_job)
        assert gpu_slots.held() is None
    finally:
        long_job.kill()
        long_job.wait()
        os.close(held.fd)
    # a job waiting in acquire() for GPU 0 (its place in the waiting folder): a job that starts takes GPU 1
    waiter = in_line([0], slot_state, folder=gpu_slots.WAITING)
    try:
        gpu_slots.stage(eval_job)
        assert gpu_slots.held().gpu.index == 1
    finally:
        waiter.kill()
        waiter.wait()


def test_a_job_waiting_for_a_gpu_says_so_until_it_has_one(monkeypatch, slot_state):
    """acquire() keeps a place in the waiting folder while it waits, which a job starting with
    gpus.take_free_slot_at_start respects; the place goes once it has its GPU."""
    fake_gpus(monkeypatch, 1)
    gpus = gpu_slots.visible_gpus()
    held = gpu_slots.try_acquire(gpus, "the job timing")
    code = ("import sys; from abstraction_cost.measure import gpu_slots as g; "
            "s = g.acquire(g.visible_gpus(), 'eval_backend[numerics=tf32]'); print('got', s.gpu.index, flush=True); "
            "sys.stdin.read()")
    waiter = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO / "src"),
                                   "ABSTRACTION_COST_GPU_LOCK_DIR": str(slot_state)})
    try:
        deadline = time.monotonic() + 20
        while not gpu_slots._wanted(gpu_slots.WAITING, gpus) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gpu_slots._wanted(gpu_slots.WAITING, gpus)
        os.close(held.fd)
        assert waiter.stdout.readline().strip() == "got 0"
        assert not gpu_slots._wanted(gpu_slots.WAITING, gpus)
    finally:
        waiter.kill()
        waiter.wait()


# --- the Snakemake half: a workflow of timing jobs using workflow/rules/gpu_slots.smk on fake GPUs ---

JOB_SCRIPT = """
import json, os, time
begun = time.time()
from abstraction_cost.measure import gpu_slots
gpu_slots.stage(snakemake)
time.sleep(0.5)   # the imports of a staged job
slot = gpu_slots.take(snakemake)
start = time.time()
time.sleep(1.5)
end = time.time()
gpu_slots.release()
time.sleep(0.8)   # its exit: interpreter, fork server, CUDA context
json.dump({"gpu": slot.gpu.index if slot else None, "begun": begun, "start": start, "end": end, "exit": time.time(),
           "pair": snakemake.wildcards.pair}, open(snakemake.output[0], "w"))
"""


VISION_RULES = """
rule all:
    input: expand("out/gpu-{model}.json", model=range(6)), "out/cpu-m.json"
rule vision_model:
    output: "out/{pair}-{model}.json"
    resources: **timing_job("vision_model")
    script: "job.py"
"""


def slot_workflow(tmp_path, config, rules=VISION_RULES, script=JOB_SCRIPT):
    """A workflow in tmp_path of `rules` (their script: job.py) with gpu_slots.smk's resources and priorities."""
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    (tmp_path / "job.py").write_text(script)
    (tmp_path / "Snakefile").write_text(f'configfile: "config.yaml"\ninclude: "{REPO}/workflow/rules/gpu_slots.smk"\n'
                                        + rules)


def run_snakemake(tmp_path, monkeypatch, *args):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([str(SNAKEMAKE), "--cores", "8", "-d", str(tmp_path), "-s", str(tmp_path / "Snakefile"),
                           *args], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)


def overlaps(a, b):
    return a["start"] < b["end"] and b["start"] < a["end"]


def test_snakemake_runs_one_timing_job_per_gpu_at_once(tmp_path, monkeypatch):
    fake_gpus(monkeypatch, 2)
    slot_workflow(tmp_path, {"device": "auto"})
    done = run_snakemake(tmp_path, monkeypatch)
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = [json.loads(p.read_text()) for p in sorted((tmp_path / "out").glob("*.json"))]
    gpu_jobs = [j for j in jobs if j["pair"] == "gpu"]
    cpu_job = next(j for j in jobs if j["pair"] == "cpu")
    assert sorted({j["gpu"] for j in gpu_jobs}) == [0, 1]  # both GPUs used
    assert cpu_job["gpu"] is None
    for i, a in enumerate(gpu_jobs):
        for b in gpu_jobs[i + 1:]:
            assert not (a["gpu"] == b["gpu"] and overlaps(a, b)), f"two timing jobs at once on GPU {a['gpu']}"
    assert any(overlaps(a, b) for i, a in enumerate(gpu_jobs) for b in gpu_jobs[i + 1:])  # in parallel
    assert not any(overlaps(cpu_job, j) for j in gpu_jobs)  # a CPU timing job runs alone


def test_with_cpu_beside_snakemake_runs_the_cpu_timing_job_beside_the_gpu_ones(tmp_path, monkeypatch):
    fake_gpus(monkeypatch, 2)
    slot_workflow(tmp_path, {"device": "auto", "gpus": {"cpu_beside": True}})
    done = run_snakemake(tmp_path, monkeypatch)
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = [json.loads(p.read_text()) for p in sorted((tmp_path / "out").glob("*.json"))]
    cpu_job = next(j for j in jobs if j["pair"] == "cpu")
    assert cpu_job["gpu"] is None
    assert any(overlaps(cpu_job, j) for j in jobs if j["pair"] == "gpu")


def test_the_next_timing_job_starts_while_one_times_and_times_only_once_the_gpu_is_free(tmp_path, monkeypatch):
    fake_gpus(monkeypatch, 1)
    slot_workflow(tmp_path, {"device": "auto"})
    done = run_snakemake(tmp_path, monkeypatch)
    assert done.returncode == 0, done.stderr[-3000:]
    gpu_jobs = sorted((json.loads(p.read_text()) for p in (tmp_path / "out").glob("gpu-*.json")),
                      key=lambda j: j["start"])
    for a, b in zip(gpu_jobs, gpu_jobs[1:]):
        assert b["start"] >= a["end"] - 0.05, "two jobs timing at once on one GPU"
    # staged: a later job was already running (its imports done) while the one before it timed
    assert sum(b["begun"] < a["end"] - 0.4 for a, b in zip(gpu_jobs, gpu_jobs[1:])) >= len(gpu_jobs) // 2
    # given back: a later job timed while the one before it was still exiting
    assert sum(b["start"] < a["exit"] - 0.4 for a, b in zip(gpu_jobs, gpu_jobs[1:])) >= len(gpu_jobs) // 2


def test_a_staged_gpu_job_starts_off_the_timing_cores_and_asks_cuda_through_nvml(monkeypatch):
    fake_gpus(monkeypatch, 2)
    monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    pinned = []
    monkeypatch.setattr(gpu_slots.affinity, "pin_other", lambda slots, cpu_slot: pinned.append((slots, cpu_slot)))
    gpu_slots.stage(job("vision_model", {"device": "auto"}, pair="cpu"))   # a CPU timing job: nothing staged
    assert pinned == [] and "PYTORCH_NVML_BASED_CUDA_CHECK" not in os.environ
    gpu_slots.stage(job("vision_model", {"device": "auto"}, pair="gpu"))
    assert pinned == [(2, False)] and os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"


def test_with_cpu_beside_a_cpu_timing_job_starts_on_the_cpu_slot_and_every_job_splits_for_it(monkeypatch):
    """gpus.cpu_beside: the cpu pair's job pins to the CPU slot at once (its resources gave it that slot), and a GPU
    job stages off the timing cores of a split that keeps the CPU slot apart; without GPU slots or with device cpu
    a CPU timing job keeps the box (no CPU slot)."""
    fake_gpus(monkeypatch, 2)
    calls = []
    monkeypatch.setattr(gpu_slots.affinity, "pin_other", lambda slots, cpu_slot: calls.append(("other", cpu_slot)))
    monkeypatch.setattr(gpu_slots.affinity, "pin_cpu", lambda slots: calls.append(("cpu", slots)))
    beside = {"device": "auto", "gpus": {"cpu_beside": True}}
    gpu_slots.stage(job("vision_model", beside, pair="cpu"))
    gpu_slots.stage(job("vision_model", beside, pair="gpu"))
    assert calls == [("cpu", 2), ("other", True)]
    assert not gpu_slots.cpu_beside({"device": "cpu", "gpus": {"cpu_beside": True}}, 2)
    assert not gpu_slots.cpu_beside(beside, 0) and not gpu_slots.cpu_beside({"device": "auto"}, 2)


THREADS_SCRIPT = """
import json, os, subprocess, sys
told = {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
from abstraction_cost.measure import gpu_slots
gpu_slots.stage(snakemake)
row = ("import torch; from abstraction_cost.measure import environment; "   # what its environment row records
       "print(environment.capture({}, torch.device('cpu'))['torch_threads'])")
torch_threads = subprocess.run([sys.executable, "-c", row], capture_output=True, text=True, check=True).stdout.strip()
json.dump({"told": told, "omp": os.environ["OMP_NUM_THREADS"], "torch_threads": int(torch_threads)},
          open(snakemake.output[0], "w"))
"""

THREADS_RULES = """
rule vision_model:
    output: "out/{pair}-{model}.json"
    threads: {threads}
    resources: **timing_job("vision_model")
    script: "job.py"
"""


@pytest.mark.parametrize("threads", [0, 2])
def test_a_timing_job_that_claims_no_thread_runs_torch_on_one(tmp_path, monkeypatch, threads):
    """Snakemake sets OMP_NUM_THREADS and the like from a job's threads: a GPU timing job with cores of its own
    claims none (threads 0), and torch reads 0 as unset and starts an intra-op pool as wide as the machine.
    stage() makes it one thread, as a job that claims one runs, and its environment row says so; a count a job
    claims stays its own."""
    fake_gpus(monkeypatch, 1)
    slot_workflow(tmp_path, {"device": "auto"}, rules=THREADS_RULES.replace("{threads}", str(threads)),
                  script=THREADS_SCRIPT)
    done = run_snakemake(tmp_path, monkeypatch, "out/gpu-m.json")
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads((tmp_path / "out" / "gpu-m.json").read_text())
    assert seen["told"] == {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}  # Snakemake's
    assert seen["omp"] == str(threads or 1) and seen["torch_threads"] == (threads or 1)


LINE_SCRIPT = """
import json, os, time
from abstraction_cost.measure import gpu_slots
gpu_slots.stage(snakemake)
time.sleep(0.5)   # the imports of a staged job
slot = gpu_slots.take(snakemake)
start = time.time()
line = gpu_slots.LOCK_DIR / "first-in-line"
# the first job to time holds its GPU until the long job made ready later is in line (or 60 s pass)
while time.time() - start < 60 and not (
        line.is_dir() and [p for p in line.iterdir() if not p.name.startswith(".")]) and not os.path.exists("timed"):
    time.sleep(0.1)
open("timed", "a").close()
time.sleep(0.5)
json.dump({"rule": snakemake.rule, "numerics": snakemake.wildcards.get("numerics"), "start": start, "end": time.time()},
          open(snakemake.output[0], "w"))
"""


LINE_RULES = """
rule all:
    input: expand("out/eval-{{n}}.json", n=range(3)), {long_outputs}
rule eval_backend:
    output: "out/eval-{{n}}.json"
    resources: **timing_job("eval_backend")
    script: "job.py"
rule package:
    output: "out/package"
    shell: "sleep 3; touch {{output}}"   # the jobs ready without it start first
rule vision_model:
    input: {long_input}
    output: "out/{{pair}}-{{model}}.json"
    wildcard_constraints: pair="gpu"
    resources: **timing_job("vision_model")
    priority: LONG_JOB_PRIORITY
    script: "job.py"
"""


def timing_order(tmp_path, monkeypatch, long_outputs: str, long_input: str) -> list[str]:
    """On one fake GPU, three short jobs (eval_backend) and the long ones (vision_model) of `long_outputs`, whose
    inputs are `long_input` (Snakemake code): the rules in the order they took the GPU."""
    return [j["rule"] for j in timed_jobs(tmp_path, monkeypatch, {"device": "auto"},
                                          LINE_RULES.format(long_outputs=long_outputs, long_input=long_input))]


def timed_jobs(tmp_path, monkeypatch, config: dict, rules: str) -> list[dict]:
    """The jobs of `rules` (LINE_SCRIPT's) on one fake GPU, in the order they took it."""
    fake_gpus(monkeypatch, 1)
    slot_workflow(tmp_path, config, script=LINE_SCRIPT, rules=rules)
    done = run_snakemake(tmp_path, monkeypatch)
    assert done.returncode == 0, done.stderr[-3000:]
    return sorted((json.loads(p.read_text()) for p in (tmp_path / "out").glob("*.json")), key=lambda j: j["start"])


def test_a_long_job_ready_after_short_ones_takes_the_gpu_before_the_staged_short_job(tmp_path, monkeypatch):
    """Invariant: a long job (gpu_slots.FIRST_IN_LINE) ready after short ones does not queue behind them all (the
    sweep did, 19-35 s on gpu-smoke's critical path: docs/results/2026-11-27-h200x2-gpu-smoke-scaling.md). Here
    three short jobs are ready at once and a long one after its input; on one GPU it times second."""
    order = timing_order(tmp_path, monkeypatch, '"out/gpu-vision.json"', '"out/package"')
    assert order == ["eval_backend", "vision_model", "eval_backend", "eval_backend"], order


def test_a_long_job_ready_while_a_long_one_times_and_short_ones_wait_takes_the_gpu_next(tmp_path, monkeypatch):
    """Invariant: long jobs have places of their own for every GPU and one more, so a long job made ready while a
    long one times on every GPU and short jobs fill their places still starts and takes the GPU next (with one long
    place the sweep waited 30 s for a short job here: docs/results/2026-11-27-h200x2-gpu-smoke-long-places.md).
    On one GPU: a long job and three short ones ready at once, a second long one after its input."""
    order = timing_order(tmp_path, monkeypatch, 'expand("out/gpu-{m}.json", m=("first", "second"))',
                         'lambda w: ["out/package"] if w.model == "second" else []')
    assert order[:2] == ["vision_model", "vision_model"], order


COMPARISON_RULES = """
rule all:
    input: expand("out/eval-{numerics}.json", numerics=("fp32", "tf32", "bf16-autocast", "cudnn-benchmark"))
rule eval_backend:
    input: lambda w: ["out/package"] if w.numerics == "cudnn-benchmark" else []
    output: "out/eval-{numerics}.json"
    resources: **timing_job("eval_backend")
    script: "job.py"
rule package:
    output: "out/package"
    shell: "sleep 3; touch {output}"   # the other comparisons are ready without it, so they start first
"""


def test_a_comparison_whose_every_worker_loads_alone_takes_the_gpu_before_the_short_ones_waiting(
        tmp_path, monkeypatch):
    """Invariant: the comparison that loads its workers one at a time (cudnn-benchmark: gpu_slots.is_long) does not
    wait behind the other numerics' comparisons, which time in the order they look for a free GPU (two GPUs ran it
    last while one stood idle: docs/results/). Three comparisons ready at once, it after its input: it times second."""
    jobs = timed_jobs(tmp_path, monkeypatch, {"device": "auto", **COMPARISON}, COMPARISON_RULES)
    assert [j["numerics"] for j in jobs][1] == "cudnn-benchmark", jobs


@pytest.mark.parametrize("gpus, args", [({"slots": 1}, []), ({}, ["--resources", "gpu=1"])],
                         ids=["config gpus.slots", "command line --resources"])
def test_snakemake_limits_slots(tmp_path, monkeypatch, gpus, args):
    fake_gpus(monkeypatch, 2)
    slot_workflow(tmp_path, {"device": "auto", "gpus": gpus})
    done = run_snakemake(tmp_path, monkeypatch, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    gpu_jobs = [json.loads(p.read_text()) for p in sorted((tmp_path / "out").glob("gpu-*.json"))]
    assert {j["gpu"] for j in gpu_jobs} == {0}
    assert not any(overlaps(a, b) for i, a in enumerate(gpu_jobs) for b in gpu_jobs[i + 1:])


@pytest.mark.parametrize("slots, message", [(3, "'gpus.slots' is 3 but this machine has 2 GPU"),
                                            (0, "'gpus.slots' is 0 but config key 'device' is 'cuda'")])
def test_snakemake_refuses_impossible_slots_naming_the_setting(tmp_path, monkeypatch, slots, message):
    fake_gpus(monkeypatch, 2)
    slot_workflow(tmp_path, {"device": "cuda", "gpus": {"slots": slots}})
    done = run_snakemake(tmp_path, monkeypatch, "-n")
    assert done.returncode != 0 and message in done.stdout + done.stderr


REAL_SLOT_PROBE = """
import json, os, subprocess, sys
from types import SimpleNamespace
from abstraction_cost.measure import gpu_slots
job = SimpleNamespace(rule="eval_backend", config={"device": "cuda"},
                      wildcards=SimpleNamespace(items=lambda: [("implementation", "eager")]))
slot = gpu_slots.take(job)
script = "import torch; print(torch.cuda.device_count(), torch.cuda.get_device_properties(0).uuid)"
seen = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
print(json.dumps({"uuid": slot.gpu.uuid, "visible": os.environ["CUDA_VISIBLE_DEVICES"], "seen": seen}))
"""


@pytest.mark.gpu
def test_real_gpus_get_a_slot_each_by_uuid(tmp_path):
    gpus = gpu_slots.visible_gpus()
    if not gpus:
        pytest.skip("NVML finds no GPU")
    assert all(g.uuid.startswith("GPU-") for g in gpus)
    # in a fresh process (take() refuses once CUDA is initialised, as it is here after other GPU tests) locking in
    # a folder of its own (this process's measured runs hold a slot)
    env = {**os.environ, "ABSTRACTION_COST_GPU_LOCK_DIR": str(tmp_path / "locks")}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    done = subprocess.run([sys.executable, "-c", REAL_SLOT_PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["uuid"] in {g.uuid for g in gpus} and got["visible"] == got["uuid"]
    assert got["seen"][0] == "1" and got["uuid"].removeprefix("GPU-") == got["seen"][1].removeprefix("GPU-")


def test_measured_runs_safety_net_locks_the_device_a_job_took_no_slot_for(monkeypatch):
    fake_gpus(monkeypatch, 2)
    slot = gpu_slots.hold_device("fake-1")  # torch writes the UUID without NVML's "GPU-"
    assert slot.gpu.index == 1 and gpu_slots.hold_device("fake-1") is slot
    assert gpu_slots._try_lock(slot.gpu, "probe") is None


def test_a_job_whose_cuda_runs_on_another_gpu_than_its_slot_is_stopped(monkeypatch):
    """CUDA reads CUDA_VISIBLE_DEVICES once: a CUDA call among a staged job's imports, before take() set it, would
    put the job on a GPU it did not lock. measured_run's check says so instead of timing there."""
    monkeypatch.setattr(gpu_slots, "_held", gpu_slots.Slot(gpu_slots.Gpu(1, "GPU-aaaa"), 0.0, -1))
    assert gpu_slots.hold_device("aaaa") is gpu_slots._held
    with pytest.raises(RuntimeError, match="holds the slot of GPU-aaaa but CUDA runs it on bbbb"):
        gpu_slots.hold_device("bbbb")
    monkeypatch.setattr(gpu_slots, "_held", None)


def _sections(require_gpu: bool) -> dict:
    return {"study_a": {s: {"require_gpu": require_gpu} for s in ("training", "backends", "sweep")},
            "study_b": {s: {"require_gpu": require_gpu} for s in ("blocks", "models")}}


@pytest.mark.parametrize("rule, wildcards, device, require_gpu, n_slots, nothing", [
    ("vision_model", {"pair": "gpu"}, "auto", False, 0, True),      # the gpu pair needs a GPU
    ("vision_model", {"pair": "cpu"}, "auto", False, 0, False),     # the cpu pair measures on the CPU
    ("vision_model", {"pair": "cpu"}, "auto", True, 0, True),       # unless its section requires a GPU
    ("sweep", {}, "auto", True, 0, True),
    ("sweep", {}, "auto", False, 0, False),                         # Study A on the CPU
    ("sweep", {}, "auto", True, 2, False),                          # a GPU box: it times there
    ("sweep", {}, "auto", True, None, False),                       # a cluster's login node knows no GPUs
    ("train_eager", {}, "cuda", True, 0, False),                    # device cuda: no plan of not_run
])
def test_a_job_measures_nothing_only_where_it_can_only_write_not_run(rule, wildcards, device, require_gpu,
                                                                    n_slots, nothing):
    config = {"device": device, **_sections(require_gpu)}
    assert gpu_slots.measures_nothing(rule, wildcards, config, n_slots) is nothing


def test_a_job_that_measures_nothing_stages_without_cuda_or_a_fork_server(monkeypatch):
    fake_gpus(monkeypatch, 0)
    monkeypatch.setenv("AC_FORK_SERVER", "1")   # recorded, so that what stage() sets is undone after the test
    gpu_slots.stage(job("vision_model", {"device": "auto", **_sections(True)}, model="alexnet", pair="gpu"))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "" and os.environ["AC_FORK_SERVER"] == "0"
    assert gpu_slots.take(job("vision_model", {"device": "auto", **_sections(True)}, model="alexnet",
                              pair="gpu")) is None
