"""A quiet host for timing jobs (measure/affinity.py): the split of the cores among GPU slots and the rest, on fake
core counts, and what each job pins itself to."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from abstraction_cost.measure import affinity, gpu_slots


@pytest.mark.parametrize("cores,slots,timing,other", [
    (16, 1, [range(0, 8)], range(8, 16)),
    (32, 2, [range(0, 8), range(8, 16)], range(16, 32)),
    (4, 1, [range(0, 2)], range(2, 4)),
    (8, 2, [range(0, 2), range(2, 4)], range(4, 8)),
])
def test_each_gpu_slot_gets_its_own_cores_and_untimed_jobs_the_rest(cores, slots, timing, other):
    split = affinity.plan(range(cores), slots)
    assert split.timing == tuple(frozenset(r) for r in timing) and split.other == frozenset(other)
    assert not set().union(*split.timing) & split.other


@pytest.mark.parametrize("cores,slots", [(2, 1), (3, 1), (6, 2), (16, 0)])
def test_too_few_cores_pins_nothing(cores, slots):
    assert affinity.plan(range(cores), slots) is None


@pytest.fixture
def fake_cores(monkeypatch):
    """16 cores, and sched_setaffinity recorded instead of done."""
    calls = []
    monkeypatch.setattr(affinity, "_INITIAL", frozenset(range(16)))
    monkeypatch.setattr(affinity.os, "sched_setaffinity", lambda pid, cores: calls.append(set(cores)))
    monkeypatch.setattr(affinity, "_pinned", "not pinned")
    return calls


def test_a_timing_job_pins_to_its_slot_and_an_untimed_job_off_every_slot(fake_cores, monkeypatch):
    affinity.pin_timing(1, 2)
    assert fake_cores[-1] == set(range(4, 8)) and affinity.environment_columns("start")["cpu_affinity"].startswith(
        "timing slot 1: 4-7")
    monkeypatch.setattr(gpu_slots, "visible_gpus", lambda: [gpu_slots.Gpu(0, "GPU-a"), gpu_slots.Gpu(1, "GPU-b")])
    job = SimpleNamespace(rule="prepare_dataset", config={"device": "auto", "gpus": {}})
    gpu_slots.pin_untimed(job)
    assert fake_cores[-1] == set(range(8, 16))
    gpu_slots.pin_untimed(SimpleNamespace(rule="sweep", config={"device": "auto"}))   # a timing rule: take() pins
    gpu_slots.pin_untimed(SimpleNamespace(rule="prepare_dataset", config={"device": "cpu"}))
    assert len(fake_cores) == 2


def test_a_gpu_timing_job_takes_its_slots_cores(fake_cores, monkeypatch, tmp_path):
    monkeypatch.setenv(gpu_slots.FAKE_GPUS_ENV, "2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")   # no narrowing from outside
    monkeypatch.setattr(gpu_slots, "LOCK_DIR", tmp_path)
    monkeypatch.setattr(gpu_slots, "_held", None)
    job = SimpleNamespace(rule="sweep", config={"device": "cuda", "gpus": {}}, wildcards={"numerics": "fp32"})
    slot = gpu_slots.take(job)
    assert slot is not None and fake_cores[-1] == set(range(slot.gpu.index * 4, slot.gpu.index * 4 + 4))


def test_the_environment_row_says_why_nothing_was_pinned(monkeypatch):
    monkeypatch.setattr(affinity, "_INITIAL", frozenset({0, 1}))
    monkeypatch.setattr(affinity, "_pinned", "not pinned")
    affinity.pin_other(1)
    start = affinity.environment_columns("start")
    assert start["cpu_affinity"].startswith("not pinned: 2 cores for 1 timing slot(s)")
    assert start["load_avg_start"] >= 0 and "load_avg_end" in affinity.environment_columns("end")
