import time

from abstraction_cost.measure.nvml import NvmlReader, NvmlSampler, Sample


class FakeDevice:
    """A device whose memory use and utilisation step up when a phase starts."""

    def __init__(self):
        self.busy = False
        self.reads = 0

    def read(self) -> Sample:
        self.reads += 1
        level = 1.0 if self.busy else 0.0
        return Sample(t=time.monotonic(), mem_used_mib=100 + 900 * level, gpu_util_pct=90 * level,
                      sm_clock_mhz=1980, temperature_c=40 + 10 * level, power_w=100 + 300 * level)


def test_samples_are_attributed_to_their_phase():
    device = FakeDevice()
    with NvmlSampler(device, interval_ms=5) as sampler:
        with sampler.phase("idle"):
            time.sleep(0.05)
        device.busy = True
        with sampler.phase("busy"):
            time.sleep(0.05)
        device.busy = False
    idle, busy = sampler.summary("idle"), sampler.summary("busy")
    assert idle["nvml_samples"] >= 3 and busy["nvml_samples"] >= 3
    assert idle["gpu_util_max_pct"] == 0 and idle["mem_used_mib_max"] == 100
    assert busy["gpu_util_mean_pct"] == 90 and busy["mem_used_mib_max"] == 1000 and busy["power_w_mean"] == 400


def test_a_phase_shorter_than_the_interval_still_gets_a_sample():
    with NvmlSampler(FakeDevice(), interval_ms=10_000) as sampler:
        time.sleep(0.01)
        with sampler.phase("short"):
            pass
    assert sampler.summary("short")["nvml_samples"] == 1


def test_without_a_device_columns_are_null_and_the_reason_is_kept():
    reader, status = NvmlReader.open(None)
    with NvmlSampler(reader, status=status) as sampler:
        with sampler.phase("p"):
            pass
    summary = sampler.summary("p")
    assert summary["nvml_samples"] == 0 and summary["gpu_util_mean_pct"] is None
    assert sampler.status == "no CUDA device in use"


def test_an_unknown_device_is_reported_not_raised():
    reader, status = NvmlReader.open("GPU-00000000-0000-0000-0000-000000000000")
    assert reader is None and status.startswith("NVML unavailable")


def test_a_device_that_stops_answering_ends_sampling_with_a_reason():
    class Failing(FakeDevice):
        def read(self):
            raise RuntimeError("GPU is lost")

    with NvmlSampler(Failing(), interval_ms=5) as sampler:
        time.sleep(0.02)
    assert sampler.status == "sampling stopped: RuntimeError: GPU is lost"


def test_a_phase_marked_from_timestamps_takes_the_next_sample_within_one_interval():
    device = FakeDevice()
    with NvmlSampler(device, interval_ms=50) as sampler:
        time.sleep(0.06)
        now = time.monotonic()
        sampler.phases["short"] = (now - 0.002, now - 0.001)  # between two samples, as a C++ phase record
        sampler.phases["long_ago"] = (now - 10.0, now - 9.0)
        time.sleep(0.06)
    assert sampler.summary("short")["nvml_samples"] == 1
    assert sampler.summary("long_ago")["nvml_samples"] == 0
