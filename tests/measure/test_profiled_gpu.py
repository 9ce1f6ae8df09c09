"""The profiled pass on the GPU (issue 30): its record has kernel times and launches, for a served eager worker
(torch.profiler) and ac_libtorch (LibTorch's Kineto profiler). A process stays slower once the profiler has run
in it (these tests print the timed blocks' medians before and after), which is why the conductor runs every
worker's profiled passes after all of that worker's timed turns (tests/study_a/sweep/test_interleaved.py checks the
order): adding the pass changes no timed call.

    pytest -m gpu tests/measure/test_profiled_gpu.py -s    (prints each cell's medians and ratio)
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from abstraction_cost.measure.statistics import hierarchical_interval
from abstraction_cost.study_a.sweep.cells import Cell
from abstraction_cost.study_a.sweep.serial import PythonModel
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

    from abstraction_cost.study_a import native
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
