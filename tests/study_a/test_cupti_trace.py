"""ac_cudnn's device profiler on any machine (issue 30): the Chrome trace its CUPTI subscriber writes
(native/common/chrome_trace.h, the records made up by native/common/examples/chrome_trace_check.cpp) read by the
conductor's code (measure/profiled.with_trace) into the profile's device columns, and those columns filling the
decomposition's cudnn and cudnn-graphs rows that were partial without them. The subscriber itself
(native/cudnn/cupti_trace.cpp) runs on a GPU: tests/measure/test_profiled_gpu.py."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import polars as pl
import pytest

from abstraction_cost import tables
from abstraction_cost.derived import decomposition
from abstraction_cost.measure import profiled

from tests.fixtures.cpp import compile_program
from tests.fixtures.repository import REPO
SOURCE = "CUPTI activity API (ac_cudnn)"  # native/cudnn/cupti_trace.h kCuptiSource
NO_SUBSCRIBER = ("C++ program: no CUPTI activity subscriber is linked in (its kernels: sweep_kernels, under Nsight "
                 "Compute); device columns null")  # native/common/sweep.h no_device_profiler()


@pytest.fixture(scope="module")
def check_program(tmp_path_factory) -> Path:
    return compile_program(tmp_path_factory.mktemp("chrome_trace") / "chrome_trace_check",
                           REPO / "native/common/examples/chrome_trace_check.cpp")


def _profile_record(check_program, tmp_path, mode: str, wall_ms: float = 0.1) -> tuple[dict, dict]:
    """The profile record ac_cudnn's `profile 2` writes (sweep_serve.h) for the made-up loop, as the conductor
    reads it, and the raw trace."""
    trace = tmp_path / f"ac-profile-1-{mode}.json"
    subprocess.run([str(check_program), mode, str(trace)], check=True)
    raw = json.loads(trace.read_text())
    record = {"kind": "profile", "cell": 0, "status": "ok", "profiled_calls": 2, "host_issue_ms": 0.05,
              "host_cpu_ms": 0.05, "wall_ms": wall_ms, "trace_file": str(trace), "cuda": True,
              "device_source": SOURCE}
    out = profiled.with_trace(record)
    assert not trace.exists() and "trace_file" not in out and "cuda" not in out
    return out, raw


def test_the_trace_has_the_shape_kineto_exports(check_program, tmp_path):
    _, raw = _profile_record(check_program, tmp_path, "eager")
    assert raw["baseTimeNanoseconds"] == 1_700_000_000_123_456_789 and raw["traceName"] == SOURCE
    events = raw["traceEvents"]
    assert all(e["ph"] == "X" and {"cat", "name", "ts", "dur", "pid", "tid", "args"} <= set(e) for e in events)
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)  # CUPTI's buffer order undone
    kernels = [e for e in events if e["cat"] == "kernel"]
    # CUPTI's ns relative to the base, in µs with the nanoseconds kept (a double of 1.7e15 µs would not keep them)
    assert kernels[0]["ts"] == 14.0 and kernels[0]["dur"] == 8.001
    assert {e["cat"] for e in events} == {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver"}
    # driver calls: only launches outside a runtime call (the runtime's own cuLaunchKernel is the same launch)
    assert [e["name"] for e in events if e["cat"] == "cuda_driver"] == ["cuLaunchKernel", "cuLaunchKernel"]
    assert next(e for e in events if e["cat"] == "gpu_memcpy")["name"] == "Memcpy HtoD (Pageable -> Device)"


def test_ac_cudnns_trace_gives_kernel_time_launches_and_copies_per_call(check_program, tmp_path):
    out, _ = _profile_record(check_program, tmp_path, "eager")
    assert out["device_source"] == SOURCE and out["device_message"] is None
    # per call: __cudaLaunchKernel (CUDA 13's <<<...>>>), 2 cudaLaunchKernel, 1 cuLaunchKernel
    assert out["kernels"] == 4 and out["launch_calls"] == 4
    assert out["device_ms"] == pytest.approx(4 * 8.001e-3)    # four kernels of 8.001 µs
    assert out["memcpy_ms"] == pytest.approx(7e-3)            # the copy's 6 µs and the memset's 1 µs
    assert out["device_busy_ms"] == pytest.approx((6 + 4 * 8.001 + 1) * 1e-3)
    assert out["device_idle_ms"] == pytest.approx(0.1 - out["device_busy_ms"])


def test_a_graph_replay_is_one_launch_and_its_kernels_count(check_program, tmp_path):
    """As torch.profiler counts eager-cudagraphs: the replayed kernels are kernels, cudaGraphLaunch one launch."""
    out, _ = _profile_record(check_program, tmp_path, "graphs")
    assert out["kernels"] == 4 and out["launch_calls"] == 1
    assert out["device_ms"] == pytest.approx(4 * 8.001e-3) and out["device_source"] == SOURCE


def test_cupti_callback_names_lose_their_abi_suffixes(check_program):
    names = ["cudaLaunchKernel_v7000", "__cudaLaunchKernel_v13000", "__cudaLaunchKernel_ptsz_v13000",
             "cudaGraphLaunch_v10000", "cuLaunchKernel", "cuLaunchKernel_ptsz",
             "cudaGraphLaunch_v10000_ptsz", "cuLaunchKernelEx", "cudaLaunchKernelExC_v11060", "cudaMemcpy_v3020",
             "cudaMemcpyAsync_ptsz", "cuMemcpyHtoD_v2", "my_function_vx"]
    out = subprocess.run([str(check_program), "names", *names], check=True, capture_output=True, text=True)
    assert out.stdout.split() == ["cudaLaunchKernel", "__cudaLaunchKernel", "__cudaLaunchKernel", "cudaGraphLaunch",
                                  "cuLaunchKernel", "cuLaunchKernel", "cudaGraphLaunch", "cuLaunchKernelEx",
                                  "cudaLaunchKernelExC", "cudaMemcpy", "cudaMemcpyAsync", "cuMemcpyHtoD",
                                  "my_function_vx"]


def test_a_record_without_a_source_is_ac_libtorchs(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"cat": "kernel", "name": "k", "ts": 0, "dur": 300}]}')
    out = profiled.with_trace({"profiled_calls": 1, "wall_ms": 1.0, "trace_file": str(trace), "cuda": True})
    assert out["device_source"] == profiled.LIBTORCH_SOURCE == "LibTorch profiler (Kineto/CUPTI)"


# ------------------------------------------------------------------------------------------------ decomposition
TIMES = {"eager": 10.0, "torchscript-cpp": 7.0, "libtorch": 6.5, "cudnn": 5.0, "cudnn-graphs": 3.5}


def _tables(cudnn_profile: dict[str, dict]) -> tuple[pl.DataFrame, pl.DataFrame]:
    sweep = [{"implementation": i, "numerics": "fp32", "cell": 0, "batch_size": 8, "resolution": 64,
              "transfer": "float32-pageable", "status": "ok", "time_ms": t, "h2d_ms": 0.5, "run_id": "r1"}
             for i, t in TIMES.items()]
    torch_side = {"device_ms": 2.0, "kernels": 160.0, "launch_calls": 160.0, "device_idle_ms": 3.0,
                  "device_message": None, "device_source": "torch.profiler (Kineto/CUPTI)"}
    profile = [{"implementation": i, "numerics": "fp32", "cell": 0, "status": "ok", "profiled_calls": 2,
                "host_issue_ms": t * 0.8, "host_cpu_ms": t * 0.8, "wall_ms": t, "run_id": "r1",
                **(cudnn_profile[i] if i in cudnn_profile else torch_side)}
               for i, t in TIMES.items()]
    return (tables.frame("sweep", [{**dict.fromkeys(tables.schema("sweep")), **r} for r in sweep]),
            tables.frame("sweep_profile", [{**dict.fromkeys(tables.schema("sweep_profile")), **r} for r in profile]))


def _cudnn_rows(cudnn_profile: dict[str, dict]) -> dict[str, dict]:
    d = decomposition.decomposition_rows(*_tables(cudnn_profile))
    return {r["implementation"]: r for r in d.iter_rows(named=True) if r["implementation"].startswith("cudnn")}


def test_without_cupti_the_cudnn_rows_are_partial_and_say_why():
    no_device = {k: None for k in profiled.DEVICE_COLUMNS} | {"device_message": NO_SUBSCRIBER}
    rows = _cudnn_rows({"cudnn": no_device, "cudnn-graphs": no_device})
    for r in rows.values():
        assert r["status"] == "partial" and r["device_ms"] is None and r["other_ms"] is None
        assert r["message"] == NO_SUBSCRIBER
    assert rows["cudnn"]["launch_ms"] == pytest.approx(1.5)  # the pair's difference needs no device time


def test_ac_cudnns_traces_fill_the_kernel_level_of_cudnn_and_cudnn_graphs(check_program, tmp_path):
    """The profile records as the conductor keeps them (with_trace over ac_cudnn's traces): both rows ok, their
    kernel time and launches from the trace, and the parts of each call summing to it."""
    cudnn, _ = _profile_record(check_program, tmp_path, "eager", wall_ms=TIMES["cudnn"])
    graphs, _ = _profile_record(check_program, tmp_path, "graphs", wall_ms=TIMES["cudnn-graphs"])
    keep = (*profiled.DEVICE_COLUMNS, "device_message", "device_source")
    rows = _cudnn_rows({"cudnn": {k: cudnn[k] for k in keep}, "cudnn-graphs": {k: graphs[k] for k in keep}})
    for name, r in rows.items():
        assert r["status"] == "ok" and r["message"] is None, r
        assert r["device_ms"] == pytest.approx(4 * 8.001e-3) and r["kernels"] == 4
        parts = r["transfer_ms"] + r["python_ms"] + r["dispatch_ms"] + r["launch_ms"] + r["device_ms"] + r["other_ms"]
        assert parts == pytest.approx(r["time_ms"]), name
    assert rows["cudnn"]["launch_calls"] == 4 and rows["cudnn-graphs"]["launch_calls"] == 1
    assert rows["cudnn"]["launch_ms"] == pytest.approx(1.5) and rows["cudnn-graphs"]["launch_ms"] == 0
    assert rows["cudnn"]["bound"] == "host"  # the made-up kernels keep the device busy 39 µs of a 5 ms call


# ------------------------------------------------------------------------------ the subscriber where CUPTI refuses
REFUSED = r'''
#include <iostream>
#include "cupti_trace.h"
int main(int, char** argv) {  // twice: the callbacks are registered once, every pass reports
  for (int i = 0; i < 2; ++i) std::cout << ac::cudnn::cupti_trace([] {}, argv[1]) << std::endl;
}
'''


def _cupti() -> tuple[Path, Path] | None:
    """cupti.h's folder and libcupti's, as native/cudnn/CMakeLists.txt looks: the toolkit, then torch's wheels."""
    from abstraction_cost.programs import native
    toolkit = native._cuda_toolkit()
    candidates = [(toolkit / "include", toolkit / lib) for lib in ("lib64", "lib")] if toolkit else []
    candidates += [(toolkit / "extras/CUPTI/include", toolkit / "extras/CUPTI/lib64")] if toolkit else []
    candidates += [(lib.parent / "include", lib) for lib in native._cuda_wheel_lib_dirs()]
    for include, lib in candidates:
        if (include / "cupti.h").is_file() and any(lib.glob("libcupti.so*")):
            return include, lib
    return None


def test_a_cupti_that_refuses_or_records_nothing_is_a_reason_not_a_failure(tmp_path):
    """native/cudnn/cupti_trace.cpp itself: without a GPU (CI) cuptiActivityEnable fails and the pass returns why
    (e.g. CUPTI_ERROR_UNKNOWN here, CUPTI_ERROR_INSUFFICIENT_PRIVILEGES where profiling is not permitted); on a GPU
    a loop that launches nothing records no kernel. Either way nothing is written and the program goes on."""
    found = _cupti()
    if found is None:
        pytest.skip("no CUPTI (cupti.h and libcupti) in the toolkit or torch's wheels")
    include, lib = found
    (tmp_path / "refused.cpp").write_text(REFUSED)
    trace = tmp_path / "trace.json"
    exe = compile_program(tmp_path / "refused", tmp_path / "refused.cpp", REPO / "native/cudnn/cupti_trace.cpp",
                          includes=(REPO / "native/cudnn", REPO / "native/common", include),
                          extra=(str(sorted(lib.glob("libcupti.so*"))[0]), f"-Wl,-rpath,{lib}"))
    out = subprocess.run([str(exe), str(trace)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and lines[0] == lines[1], lines
    assert (lines[0].startswith("CUPTI: cuptiActivityEnable(CONCURRENT_KERNEL) failed: CUPTI_ERROR_")
            or lines[0].startswith("CUPTI recorded no kernel")), lines
    assert lines[0].endswith("device columns null") and not trace.exists()
