"""A quiet host for timing jobs (measure/affinity.py): the split of the cores among GPU slots and the rest, on fake
core counts, and what each job pins itself to."""
from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from abstraction_cost.measure import affinity, gpu_slots
from tests.fixtures.spare_cores import spare_cores  # noqa: F401 (a fixture)


@pytest.mark.parametrize("cores,slots,timing,other", [
    (16, 1, [range(0, 8)], range(8, 16)),
    (32, 2, [range(0, 8), range(8, 16)], range(16, 32)),
    (4, 1, [range(0, 2)], range(2, 4)),
    (8, 2, [range(0, 2), range(2, 4)], range(4, 8)),
])
def test_each_gpu_slot_gets_its_own_cores_and_untimed_jobs_the_rest(cores, slots, timing, other):
    split = affinity.plan(range(cores), slots, thread_siblings={})
    assert split.timing == tuple(frozenset(r) for r in timing) and split.other == frozenset(other)
    assert not set().union(*split.timing) & split.other


@pytest.mark.parametrize("cores,slots", [(2, 1), (3, 1), (6, 2), (16, 0)])
def test_too_few_cores_pins_nothing(cores, slots):
    assert affinity.plan(range(cores), slots, thread_siblings={}) is None


@pytest.mark.parametrize("cores,slots,other,cpu", [
    (32, 2, range(16, 24), range(24, 32)),    # two H100s' box: a CPU slot as large as a GPU slot's
    (16, 1, range(8, 12), range(12, 16)),     # one H100's box: half the rest
    (8, 1, range(4, 6), range(6, 8)),
])
def test_a_cpu_slot_takes_the_last_half_of_the_rest_and_the_gpu_slots_keep_theirs(cores, slots, other, cpu):
    split = affinity.plan(range(cores), slots, thread_siblings={}, cpu_slot=True)
    assert split.timing == affinity.plan(range(cores), slots, thread_siblings={}).timing
    assert split.other == frozenset(other) and split.cpu == frozenset(cpu)
    assert affinity.plan(range(cores), slots, thread_siblings={}).cpu == frozenset()


def test_too_few_cores_for_a_cpu_slot_pins_nothing():
    assert affinity.plan(range(4), 1, thread_siblings={}) is not None
    assert affinity.plan(range(4), 1, thread_siblings={}, cpu_slot=True) is None


def _sysfs(root, pairs):
    """A fake /sys/devices/system/cpu with each pair of CPUs the two threads of one core."""
    for pair in pairs:
        for cpu in pair:
            path = root / f"cpu{cpu}/topology/thread_siblings_list"
            path.parent.mkdir(parents=True)
            path.write_text(",".join(map(str, pair)) + "\n")
    return root


@pytest.mark.parametrize("pairs,slots,timing,other", [
    # 8 cores whose threads the kernel numbers apart (0 and 8): a split by numbers would put the rest on the
    # timing cores' other threads
    ([(i, i + 8) for i in range(8)], 1, [{0, 1, 2, 3, 8, 9, 10, 11}], {4, 5, 6, 7, 12, 13, 14, 15}),
    ([(i, i + 16) for i in range(16)], 2, [{0, 1, 2, 3, 16, 17, 18, 19}, {4, 5, 6, 7, 20, 21, 22, 23}],
     set(range(8, 16)) | set(range(24, 32))),
    # threads numbered side by side (0-1): the same split as by numbers
    ([(2 * i, 2 * i + 1) for i in range(8)], 1, [set(range(8))], set(range(8, 16))),
])
def test_the_split_hands_out_whole_physical_cores(tmp_path, pairs, slots, timing, other):
    cpus = sorted(c for pair in pairs for c in pair)
    thread_siblings = affinity.siblings(cpus, root=_sysfs(tmp_path, pairs))
    split = affinity.plan(cpus, slots, thread_siblings)
    assert split.timing == tuple(frozenset(t) for t in timing) and split.other == frozenset(other)


def test_siblings_outside_the_allowed_cpus_are_not_handed_out(tmp_path):
    """A job already narrowed to CPUs 0-3 and 8-9 of a 2-thread machine: core 2's thread 10 is not its to give."""
    thread_siblings = affinity.siblings([0, 1, 2, 3, 8, 9], root=_sysfs(tmp_path, [(i, i + 8) for i in range(4)]))
    assert affinity.physical_cores([0, 1, 2, 3, 8, 9], thread_siblings) == [
        frozenset({0, 8}), frozenset({1, 9}), frozenset({2}), frozenset({3})]


def test_a_machine_without_topology_files_splits_by_numbers(tmp_path):
    assert affinity.siblings([0, 1], root=tmp_path) == {0: frozenset({0}), 1: frozenset({1})}


@pytest.fixture
def fake_cores(monkeypatch):
    """16 cores, and sched_setaffinity recorded instead of done: the process's (pid 0) in the list returned, every
    thread's in its `threads` attribute."""
    calls = ThreadCalls()
    monkeypatch.setattr(affinity, "_INITIAL", frozenset(range(16)))
    monkeypatch.setattr(affinity, "SYSFS_CPU", Path("/nonexistent"))   # one thread per core
    monkeypatch.setattr(affinity.os, "sched_setaffinity",
                        lambda pid, cores: (calls if pid == 0 else calls.threads).append(set(cores)))
    monkeypatch.setattr(affinity, "_pinned", "not pinned")
    monkeypatch.setattr(affinity, "_cores", None)
    monkeypatch.setattr(affinity, "_spare", frozenset())
    monkeypatch.setattr(affinity, "_left", frozenset())
    return calls


class ThreadCalls(list):
    def __init__(self):
        super().__init__()
        self.threads = []


def test_a_timing_job_pins_to_its_slot_and_an_untimed_job_off_every_slot(fake_cores, monkeypatch):
    affinity.pin_timing(1, 2)
    assert fake_cores[-1] == set(range(4, 8)) and affinity.environment_columns("start")["cpu_affinity"].startswith(
        "timing slot 1: 4-7")
    # every thread moves (a staged job's imports may have started some), and the job's workers get its cores
    own = set(int(t) for t in os.listdir("/proc/self/task"))
    assert len(fake_cores.threads) >= len(own) and fake_cores.threads[-1] == set(range(4, 8))
    assert affinity.job_cores() == frozenset(range(4, 8))
    monkeypatch.setattr(gpu_slots, "visible_gpus", lambda: [gpu_slots.Gpu(0, "GPU-a"), gpu_slots.Gpu(1, "GPU-b")])
    job = SimpleNamespace(rule="prepare_dataset", config={"device": "auto", "gpus": {}})
    gpu_slots.pin_untimed(job)
    assert fake_cores[-1] == set(range(8, 16))
    gpu_slots.pin_untimed(SimpleNamespace(rule="sweep", config={"device": "auto"}))   # a timing rule: take() pins
    gpu_slots.pin_untimed(SimpleNamespace(rule="prepare_dataset", config={"device": "cpu"}))
    assert len(fake_cores) == 2


def test_a_timing_job_that_gives_its_slot_back_leaves_its_cores_with_every_thread(fake_cores):
    affinity.leave_slot()   # not pinned to a slot: nothing to leave
    assert fake_cores == [] and fake_cores.threads == []
    affinity.pin_timing(0, 2)
    affinity.leave_slot()
    assert fake_cores[-1] == set(range(8, 16)) and fake_cores.threads[-1] == set(range(8, 16))
    assert affinity.job_cores() == frozenset(range(8, 16))
    assert affinity.environment_columns("start")["cpu_affinity"].startswith("no timing (slot given back): 8-15")


def test_a_timing_jobs_loads_may_spread_to_the_cores_no_slot_has(fake_cores):
    affinity.pin_timing(1, 2, spread_loads=True)
    assert affinity.loading_cores() == frozenset(range(4, 8)) | frozenset(range(8, 16))
    assert affinity.environment_columns("start")["cpu_affinity"].startswith("timing slot 1: 4-7; loads on 4-15")
    affinity.pin_timing(1, 2)
    assert affinity.loading_cores() == frozenset(range(4, 8))
    assert "loads on" not in affinity.environment_columns("start")["cpu_affinity"]


WORKER = """
import subprocess, sys, threading, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
print(child.pid, flush=True)
time.sleep(30)
"""


def test_workers_load_on_the_spare_cores_too_and_go_back_after(monkeypatch, spare_cores):
    """A worker with a thread and a child process of its own (a compile pool): all of it on the job's and the
    spare cores inside the block, all back on the job's after; with no spare cores nothing moves, and a worker
    that has ended is passed over."""
    import subprocess
    import sys
    job, spare = spare_cores
    worker = subprocess.Popen([sys.executable, "-c", WORKER], stdout=subprocess.PIPE, text=True)
    child = None
    try:
        child = int(worker.stdout.readline())
        everything = lambda: [int(t) for p in (worker.pid, child) for t in os.listdir(f"/proc/{p}/task")]
        assert len(everything()) >= 3 and all(os.sched_getaffinity(t) == job for t in everything())
        monkeypatch.setattr(affinity, "_spare", frozenset())
        with affinity.loading([worker.pid]):
            assert all(os.sched_getaffinity(t) == job for t in everything())
        monkeypatch.setattr(affinity, "_spare", spare)
        with affinity.loading([worker.pid, 2**22 + 1]):
            assert all(os.sched_getaffinity(t) == job | spare for t in everything())
        assert all(os.sched_getaffinity(t) == job for t in everything())
    finally:
        if child is not None:
            os.kill(child, 9)
        worker.kill()
        worker.wait()


def test_a_cpu_timing_job_beside_the_gpus_pins_to_the_cpu_slot_and_untimed_jobs_leave_it(fake_cores, monkeypatch):
    affinity.pin_cpu(2)
    assert fake_cores[-1] == set(range(12, 16)) and affinity.job_cores() == frozenset(range(12, 16))
    assert affinity.environment_columns("start")["cpu_affinity"].startswith("CPU timing slot: 12-15")
    monkeypatch.setattr(gpu_slots, "visible_gpus", lambda: [gpu_slots.Gpu(0, "GPU-a"), gpu_slots.Gpu(1, "GPU-b")])
    gpu_slots.pin_untimed(SimpleNamespace(rule="prepare_dataset", config={"device": "auto",
                                                                          "gpus": {"cpu_beside": True}}))
    assert fake_cores[-1] == set(range(8, 12))


def test_a_gpu_timing_job_takes_its_slots_cores(fake_cores, monkeypatch, tmp_path):
    monkeypatch.setenv(gpu_slots.FAKE_GPUS_ENV, "2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")   # no narrowing from outside
    monkeypatch.setattr(gpu_slots, "LOCK_DIR", tmp_path)
    monkeypatch.setattr(gpu_slots, "_held", None)
    job = SimpleNamespace(rule="sweep", config={"device": "cuda", "gpus": {}}, wildcards={"numerics": "fp32"})
    slot = gpu_slots.take(job)
    mine = set(range(slot.gpu.index * 4, slot.gpu.index * 4 + 4))
    assert slot is not None and fake_cores[-1] == mine and affinity.loading_cores() == mine
    os.close(slot.fd)
    monkeypatch.setattr(gpu_slots, "_held", None)
    job.config["gpus"]["spread_loads"] = True
    slot = gpu_slots.take(job)
    mine = set(range(slot.gpu.index * 4, slot.gpu.index * 4 + 4))
    assert fake_cores[-1] == mine and affinity.loading_cores() == mine | set(range(8, 16))


def test_the_environment_row_says_why_nothing_was_pinned(monkeypatch):
    monkeypatch.setattr(affinity, "_INITIAL", frozenset({0, 1}))
    monkeypatch.setattr(affinity, "_pinned", "not pinned")
    affinity.pin_other(1)
    start = affinity.environment_columns("start")
    assert start["cpu_affinity"].startswith("not pinned: 2 cores for 1 timing slot(s)")
    assert start["load_avg_start"] >= 0 and "load_avg_end" in affinity.environment_columns("end")


def test_a_timing_jobs_workers_take_their_turns_on_one_cpu_and_the_job_stays_off_it(monkeypatch):
    """Two sleeping workers' main threads go to one CPU of the job's cores for the block (not CPU 0), every thread
    of the job to the rest; after it all are back on the job's cores. A job not pinned to a timing slot, or with
    no workers, moves nothing."""
    import subprocess
    import sys
    cores = frozenset(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two CPUs")
    workers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) for _ in range(2)]
    try:
        monkeypatch.setattr(affinity, "_pinned", "not pinned: 2 cores for 1 timing slot(s)")
        with affinity.turns_on_one_cpu([w.pid for w in workers]) as turns:
            assert turns.pick() is None and all(os.sched_getaffinity(w.pid) == cores for w in workers)
        monkeypatch.setattr(affinity, "_pinned", "timing slot 0: 0-1")
        with affinity.turns_on_one_cpu([]) as turns:
            assert turns.pick() is None and os.sched_getaffinity(0) == cores
        with affinity.turns_on_one_cpu([w.pid for w in workers] + [2**22 + 1]) as turns:   # one has ended
            assert turns.cpu == max(cores) and all(os.sched_getaffinity(w.pid) == {turns.cpu} for w in workers)
            cpu = turns.pick()
            assert cpu in cores and cpu != 0
            assert all(os.sched_getaffinity(w.pid) == {cpu} for w in workers)
            assert all(os.sched_getaffinity(int(t)) == cores - {cpu} for t in os.listdir("/proc/self/task"))
        assert all(os.sched_getaffinity(w.pid) == cores for w in workers)
        assert all(os.sched_getaffinity(int(t)) == cores for t in os.listdir("/proc/self/task"))
    finally:
        for w in workers:
            w.kill()
            w.wait()


def test_a_job_that_times_in_its_own_thread_keeps_that_thread_on_the_picked_cpu(monkeypatch):
    """Study B's blocks time in the job's own main thread: given as a pid (its native id), it goes to the picked
    CPU and stays there, while the job's other threads (here a sleeping one) go to the rest; all back after."""
    import threading
    cores = frozenset(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two CPUs")
    monkeypatch.setattr(affinity.Turns, "candidates", property(lambda self: sorted(self.cores)))
    monkeypatch.setattr(affinity, "_pinned", "timing slot 0")
    monkeypatch.setattr(affinity, "_turn_probes", [])
    fast = min(cores)
    other = threading.Thread(target=threading.Event().wait, args=(30,), daemon=True)
    other.start()
    with affinity.turns_on_one_cpu([threading.get_native_id()],
                                   probe=lambda: 1.0 if os.sched_getaffinity(0) == {fast} else 2.0) as turns:
        assert turns.pick() == fast
        assert os.sched_getaffinity(0) == {fast}                            # this thread times there
        assert os.sched_getaffinity(other.native_id) == cores - {fast}      # the others do not
    assert os.sched_getaffinity(0) == cores and os.sched_getaffinity(other.native_id) == cores


def test_cpu_0_is_no_candidate_while_the_job_has_another():
    assert affinity.Turns([], frozenset({0, 5, 3})).candidates == [3, 5]
    assert affinity.Turns([], frozenset({0})).candidates == [0]


def test_each_turn_goes_to_the_cpu_its_probe_found_fastest(monkeypatch):
    """The probe runs on every candidate CPU and the workers follow the fastest at each pick: here the host's
    state changes between two turns; the environment row gives the picked CPUs' probes. (Every core is a candidate
    here, CPU 0 too, so that two cores suffice.)"""
    import subprocess
    import sys
    cores = frozenset(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two CPUs")
    monkeypatch.setattr(affinity.Turns, "candidates", property(lambda self: sorted(self.cores)))
    state = {"slow": max(cores)}
    probed = []

    def probe() -> float:   # µs per op where the probing thread runs: the slow CPU twice the others
        (cpu,) = os.sched_getaffinity(0)
        probed.append(cpu)
        return 2.0 if cpu == state["slow"] else 1.0

    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        monkeypatch.setattr(affinity, "_pinned", "timing slot 0")
        monkeypatch.setattr(affinity, "_turn_probes", [])
        assert affinity.environment_columns("end")["turn_host_op_us"] is None
        with affinity.turns_on_one_cpu([worker.pid], probe=probe) as turns:
            assert not probed and turns.cpu == max(cores)   # entry: the last candidate, for warm-ups
            first = turns.pick()
            assert sorted(probed) == sorted(cores)
            assert first != max(cores) and os.sched_getaffinity(worker.pid) == {first}
            assert all(os.sched_getaffinity(int(t)) == cores - {first} for t in os.listdir("/proc/self/task"))
            state["slow"] = first
            assert turns.pick() != first and os.sched_getaffinity(worker.pid) == {turns.cpu}
        assert os.sched_getaffinity(worker.pid) == cores
        # the environment row's end: the picked CPUs' probes, the fast state at both turns
        end = affinity.environment_columns("end")
        assert end["probed_turns"] == 2 and end["turn_host_op_us"] == 1.0
    finally:
        worker.kill()
        worker.wait()


def test_spread_loads_is_refused_unless_true_or_false_naming_its_key(smoke_config):
    from abstraction_cost import config as cfg
    smoke_config["gpus"] = {"spread_loads": "yes"}
    with pytest.raises(cfg.ConfigError, match=r"'gpus.spread_loads': 'yes' is not of type 'boolean'"):
        cfg.validate(smoke_config)
