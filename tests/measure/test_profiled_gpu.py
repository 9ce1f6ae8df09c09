"""The profiled pass on the GPU (issue 30): its record has kernel times and launches, for a served eager worker
(torch.profiler), ac_libtorch (LibTorch's Kineto profiler) and ac_cudnn (its own subscriber to CUPTI's activity
API, cudnn and cudnn-graphs, against ac_libtorch at the same cell). A process stays slower once the profiler has run
in it (these tests print the timed blocks' medians before and after), which is why the conductor runs every
worker's profiled passes after all of that worker's timed turns (tests/study_a/sweep/test_interleaved.py checks the
order): adding the pass changes no timed call.

    pytest -m gpu tests/measure/test_profiled_gpu.py -s    (prints each cell's medians and ratio)
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from abstraction_cost.measure.statistics import hierarchical_interval
from abstraction_cost.study_a.sweep.cells import Cell
from abstraction_cost.study_a.sweep.python_model import PythonModel
from abstraction_cost.study_a.sweep.worker import ServedCells
from abstraction_cost.study_a.transfer import Pool
from tests.fixtures.sweep_jobs import make_pool

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
BLOCKS, CALLS = 8, 40


def _served(tmp_path, cells):
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    pool = Pool(str(make_pool(tmp_path)))
    device = torch.device("cuda")
    model = PythonModel("eager", SimpleNamespace(weights=str(weights)), 3, 10, device)
    return ServedCells(model, cells, pool, device, warmup=10, warmup_max=30)


@pytest.mark.parametrize("batch,resolution", [(8, 16), (32, 16)])
def test_the_eager_workers_profiled_pass_records_kernel_time_and_launches(tmp_path, batch, resolution):
    """Unprofiled blocks, then profiled passes alternating with blocks: the pass's record is complete, and the
    medians before and after are printed."""
    served = _served(tmp_path, [Cell(0, batch, resolution, "float32-pageable")])
    assert served.prepare(0)["kind"] == "ready"
    before = [served.time(CALLS)["times_ms"] for _ in range(BLOCKS)]
    record = served.profile(5)
    after = []
    for _ in range(BLOCKS):
        after.append(served.time(CALLS)["times_ms"])
        served.profile(5)
    served.end()
    print(f"profile {record}")
    assert record["status"] == "ok" and record["device_source"] is not None, record
    assert record["device_message"] is None or "left out" in record["device_message"], record
    assert record["device_ms"] > 0 and record["kernels"] >= 50 and record["launch_calls"] >= 50, record
    assert 0 < record["host_issue_ms"] <= record["wall_ms"] * 1.05, record
    assert record["device_busy_ms"] <= record["wall_ms"] * 1.05 and record["device_idle_ms"] >= 0, record
    _print(before, after, f"eager batch {batch} × {resolution} px")


def _print(before: list[list[float]], after: list[list[float]], what: str) -> None:
    b, a = hierarchical_interval(before), hierarchical_interval(after)
    print(f"{what}: before {b.estimate:.3f} ms [{b.low:.3f}–{b.high:.3f}], after a profiled pass "
          f"{a.estimate:.3f} ms [{a.low:.3f}–{a.high:.3f}], ratio {a.estimate / b.estimate:.3f}")


def test_ac_libtorchs_profiled_pass_reads_its_kineto_trace_into_device_columns(tmp_path):
    """The same for ac_libtorch --serve (libtorch), whose device loop runs under LibTorch's Kineto profiler."""
    import json
    import subprocess

    from abstraction_cost.programs import native
    from abstraction_cost.measure import profiled
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    model, extra = "libtorch", []
    command = [str(native.ensure_built("libtorch")), "sweep", "--model", model, "--device", "cuda", "--tf32", "0",
               "--cudnn-benchmark", "0", "--channels", "3", "--pool", "2", "--inputs", str(make_pool(tmp_path)),
               "--mean", "0.5,0.5,0.5", "--std", "0.25,0.25,0.25", "--batches", "8", "--resolutions", "16",
               "--warmup", "10", "--repeats", "1", "--transfers", "float32-pageable", "--weights", str(weights),
               "--classes", "10", "--serve", "1", *extra]
    script = ["cell 0"] + [f"time {CALLS}"] * BLOCKS + ["profile 5"] + [f"time {CALLS}", "profile 5"] * BLOCKS + ["end"]
    result = subprocess.run(command, input="\n".join(script) + "\n", capture_output=True, text=True, timeout=300,
                            env=native.runtime_env())
    assert result.returncode == 0, result.stderr[-2000:]
    records = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    blocks = [r["times_ms"] for r in records if r["kind"] == "block"]
    _print(blocks[:BLOCKS], blocks[BLOCKS:], f"ac_libtorch {model}")
    profile = profiled.with_trace(next(r for r in records if r["kind"] == "profile"))
    print(profile)
    assert profile["device_ms"] and profile["kernels"] >= 50 and profile["launch_calls"] >= 50, profile


# ------------------------------------------------------------------------------- ac_cudnn: CUPTI's activity API
PROFILE_CALLS = 5


def _pool_at(directory, resolutions=(16, 64)):
    """A sweep input directory (rule sweep_inputs' format) with 2 images at each resolution."""
    import numpy as np

    from abstraction_cost.study_a import transfer
    images = np.random.default_rng(0).integers(0, 256, size=(2, 3, 40, 40), dtype=np.uint8)
    out = directory / "inputs"
    out.mkdir()
    for r in resolutions:
        transfer.resize(images, r).tofile(out / f"res{r}.u8")
    (out / transfer.MANIFEST).write_text(
        f'{{"channels": 3, "pool": 2, "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25], '
        f'"resolutions": {list(resolutions)}}}')
    return out


def _served_profile(implementation: str, inputs, weights, batch: int, resolution: int) -> dict:
    """One served C++ worker (ac_libtorch or ac_cudnn sweep --serve 1) on one cell: warm-up, two timed blocks, then
    `profile N` as the conductor asks it, read by the conductor's code (profiled.with_trace)."""
    import json
    import subprocess

    from abstraction_cost.programs import native
    from abstraction_cost.study_a import transfer
    from abstraction_cost.study_a.sweep import native_walk
    from abstraction_cost.measure import profiled
    config = {"backend_flags": {"tf32": False, "cudnn_benchmark": False},
              "study_a": {"cudnn": {"algo": "heuristic", "workspace_limit_mib": 1024}}}
    program = native.ensure_built("cudnn" if implementation.startswith("cudnn") else "libtorch")
    settings = SimpleNamespace(batches=(batch,), resolutions=(resolution,), transfers=("float32-pageable",),
                               warmup=10, repeats=1, cell_budget_s=None)
    command = native_walk.sweep_command(program, implementation,
                                        SimpleNamespace(inputs=str(inputs), weights=str(weights)),
                                        transfer.read_manifest(inputs), settings, config, torch.device("cuda"), 10)
    command = [str(c) for c in command] + ["--serve", "1", "--warmup-max", "30"]
    script = ["cell 0", f"time {CALLS}", f"time {CALLS}", f"profile {PROFILE_CALLS}", "end"]
    result = subprocess.run(command, input="\n".join(script) + "\n", capture_output=True, text=True, timeout=300,
                            env=native.runtime_env())
    assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-2000:])
    records = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [r["kind"] for r in records if r["kind"] in ("ready", "profile", "cell")] == ["ready", "profile", "cell"], \
        records
    record = next(r for r in records if r["kind"] == "profile")
    if record.get("trace_file"):  # which API calls the trace holds, per call (printed with -s: what counts as a launch)
        from collections import Counter
        events = json.loads(Path(record["trace_file"]).read_text())["traceEvents"]
        calls = Counter(f"{e['cat']}:{e['name']}" for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver"))
        print(implementation, {k: v / PROFILE_CALLS for k, v in calls.most_common()})
    return profiled.with_trace(record)


def test_ac_cudnns_profiled_pass_records_kernel_time_and_launches_under_cupti(tmp_path):
    """ac_cudnn --serve (cudnn, cudnn-graphs) runs its device loop under its own CUPTI activity subscriber
    (native/cudnn/cupti_trace.cpp): positive kernel time, kernels and launch calls per call, a graph replay one
    launch with its kernels counted, and a kernel time within a factor of three of ac_libtorch's at the same cell
    (same weights, fp32 without TF32, heuristic algorithms on both sides)."""
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    inputs = _pool_at(tmp_path)
    batch, resolution = 8, 64
    out = {impl: _served_profile(impl, inputs, weights, batch, resolution)
           for impl in ("libtorch", "cudnn", "cudnn-graphs")}
    for impl, p in out.items():
        print(f"{impl} batch {batch} × {resolution} px: device {p.get('device_ms')} ms, kernels {p.get('kernels')}, "
              f"launches {p.get('launch_calls')}, memcpy {p.get('memcpy_ms')} ms, busy {p.get('device_busy_ms')} ms, "
              f"idle {p.get('device_idle_ms')} ms, wall {p.get('wall_ms')} ms; {p.get('device_source')}; "
              f"{p.get('device_message')}")
    cudnn, graphs, libtorch = out["cudnn"], out["cudnn-graphs"], out["libtorch"]
    for p in (cudnn, graphs):
        assert p["status"] == "ok" and p["device_source"] == "CUPTI activity API (ac_cudnn)", p
        assert p["device_message"] is None or "left out" in p["device_message"], p
        assert p["device_ms"] > 0 and p["kernels"] >= 50 and p["memcpy_ms"] > 0, p
        assert p["device_busy_ms"] <= p["wall_ms"] * 1.05 and p["device_idle_ms"] >= 0, p
    # ResNet-50's 53 convolutions alone are launched one by one; a replayed graph is one launch (as eager-cudagraphs
    # counts under torch.profiler) whose kernels are all counted
    assert cudnn["launch_calls"] >= 50, cudnn
    assert 1 <= graphs["launch_calls"] <= 3, graphs
    assert graphs["kernels"] == pytest.approx(cudnn["kernels"], rel=0.1), (graphs, cudnn)
    assert libtorch["device_ms"] and libtorch["device_source"] == "LibTorch profiler (Kineto/CUPTI)", libtorch
    for p in (cudnn, graphs):
        assert 1 / 3 <= p["device_ms"] / libtorch["device_ms"] <= 3, (p, libtorch)
