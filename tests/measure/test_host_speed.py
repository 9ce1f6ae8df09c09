"""The host-speed probe of every environment row: positive numbers from a real host, and nulls (not a failed job)
where the host cannot spare the copy's memory."""
import torch

from abstraction_cost.measure import host_speed


def test_the_probe_measures_an_op_in_microseconds_and_a_copy_in_gigabytes_per_second():
    columns = host_speed.environment_columns("start")
    assert set(columns) == {"host_op_us_start", "host_copy_gbps_start"}
    assert 0.05 < columns["host_op_us_start"] < 1000  # one dispatched op: far above a bare loop, far below a ms
    assert 0.1 < columns["host_copy_gbps_start"] < 1000


def test_a_probe_that_cannot_allocate_gives_null_columns(monkeypatch):
    def no_memory(*args, **kwargs):
        raise MemoryError("no host memory")
    monkeypatch.setattr(torch, "empty_like", no_memory)
    assert host_speed.environment_columns("end") == {"host_op_us_end": None, "host_copy_gbps_end": None}

