"""A background NVML sampler whose samples are attributed to the phases they fall in.

Every `interval_ms` a thread reads the device's memory used, GPU utilisation, SM clock, temperature and power.
The caller marks phases (`with sampler.phase("train-3"): ...`); `summary(phase)` reduces the samples taken
between the phase's start and end (monotonic clock); a phase shorter than the interval gets the sample taken at
its end, or the first one after it within one interval. Without NVML or an NVIDIA GPU the sampler still works:
it takes no samples, every summary column is null, and `status` says why.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from statistics import fmean
from typing import Protocol

DEFAULT_INTERVAL_MS = 100


@dataclass(frozen=True)
class Sample:
    t: float                  # time.monotonic() when read
    mem_used_mib: float
    gpu_util_pct: float
    sm_clock_mhz: float
    temperature_c: float
    power_w: float


class Reader(Protocol):
    def read(self) -> Sample: ...


class NvmlReader:
    """Reads one device through pynvml; found by UUID so that CUDA_VISIBLE_DEVICES cannot mislead it."""

    def __init__(self, handle):
        self._handle = handle

    @classmethod
    def open(cls, cuda_uuid: str | None) -> tuple["NvmlReader | None", str]:
        """(reader, "ok"), or (None, why no reader) — never raises."""
        if cuda_uuid is None:
            return None, "no CUDA device in use"
        try:
            import pynvml
            pynvml.nvmlInit()
            uuid = cuda_uuid if cuda_uuid.startswith("GPU-") else f"GPU-{cuda_uuid}"
            return cls(pynvml.nvmlDeviceGetHandleByUUID(uuid)), "ok"
        except Exception as err:  # pynvml missing, no driver, unknown device: all mean "no samples"
            return None, f"NVML unavailable: {type(err).__name__}: {err}"

    def read(self) -> Sample:
        import pynvml
        h = self._handle
        return Sample(
            t=time.monotonic(),
            mem_used_mib=pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**20,
            gpu_util_pct=float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu),
            sm_clock_mhz=float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
            temperature_c=float(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)),
            power_w=pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
        )

    def state(self) -> dict:
        """Clocks, temperature, power and throttle reasons, for the environment table's before/after columns."""
        import pynvml
        h = self._handle
        s = self.read()
        try:
            reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
        except Exception:
            reasons = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)
        return {"sm_clock_mhz": s.sm_clock_mhz,
                "mem_clock_mhz": float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)),
                "temperature_c": s.temperature_c, "power_w": s.power_w,
                "throttle_reasons": _throttle_names(reasons)}


def _throttle_names(mask: int) -> str:
    import pynvml
    names = {"gpu_idle": "nvmlClocksThrottleReasonGpuIdle",
             "applications_clocks": "nvmlClocksThrottleReasonApplicationsClocksSetting",
             "sw_power_cap": "nvmlClocksThrottleReasonSwPowerCap",
             "hw_slowdown": "nvmlClocksThrottleReasonHwSlowdown",
             "sync_boost": "nvmlClocksThrottleReasonSyncBoost",
             "sw_thermal": "nvmlClocksThrottleReasonSwThermalSlowdown",
             "hw_thermal": "nvmlClocksThrottleReasonHwThermalSlowdown",
             "hw_power_brake": "nvmlClocksThrottleReasonHwPowerBrakeSlowdown"}
    found = [n for n, attr in names.items() if mask & getattr(pynvml, attr, 0)]
    return ",".join(found) or "none"


SUMMARY_COLUMNS = ("mem_used_mib_max", "gpu_util_mean_pct", "gpu_util_max_pct", "sm_clock_mhz_mean",
                   "temperature_c_max", "power_w_mean", "nvml_samples")


class NvmlSampler:
    """Samples a Reader in a daemon thread while running (use as a context manager)."""

    def __init__(self, reader: Reader | None, interval_ms: int = DEFAULT_INTERVAL_MS, status: str = "ok"):
        self.reader = reader
        self.interval_s = interval_ms / 1000.0
        self.status = status if reader is None else "ok"
        self.samples: list[Sample] = []
        self.phases: dict[str, tuple[float, float]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "NvmlSampler":
        if self.reader is not None:
            self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(self.reader.read())
            except Exception as err:  # a device that stops answering ends sampling, not the run
                self.status = f"sampling stopped: {type(err).__name__}: {err}"
                return
            self._stop.wait(self.interval_s)

    @contextmanager
    def phase(self, name: str):
        if name in self.phases:
            raise ValueError(f"phase {name!r} marked twice")
        start = time.monotonic()
        try:
            yield
        finally:
            if self.reader is not None:
                # one sample at the end, so that even a phase shorter than the interval has one
                try:
                    self.samples.append(self.reader.read())
                except Exception:
                    pass
            self.phases[name] = (start, time.monotonic())

    def summary(self, name: str) -> dict:
        """The phase's samples reduced to the SUMMARY_COLUMNS; nulls where there are none."""
        start, end = self.phases[name]
        samples = list(self.samples)
        inside = [s for s in samples if start <= s.t <= end]
        if not inside:
            # a phase shorter than the interval whose end was not sampled (one marked from a C++ program's
            # timestamps) takes the first sample after it, if that came within one interval
            inside = [s for s in samples if end < s.t <= end + self.interval_s][:1]
        if not inside:
            return {c: (0 if c == "nvml_samples" else None) for c in SUMMARY_COLUMNS}
        return {
            "mem_used_mib_max": max(s.mem_used_mib for s in inside),
            "gpu_util_mean_pct": fmean(s.gpu_util_pct for s in inside),
            "gpu_util_max_pct": max(s.gpu_util_pct for s in inside),
            "sm_clock_mhz_mean": fmean(s.sm_clock_mhz for s in inside),
            "temperature_c_max": max(s.temperature_c for s in inside),
            "power_w_mean": fmean(s.power_w for s in inside),
            "nvml_samples": len(inside),
        }
