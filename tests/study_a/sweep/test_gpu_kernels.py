"""The kernel table from the interleaved sweep's profiled pass, on a CUDA GPU: eager (torch.profiler), libtorch
(LibTorch's Kineto) and cudnn (ac_cudnn's CUPTI subscriber) at the kernel point, every kernel with its grid and
block, and the job's profile rows with device times."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tests.fixtures.repository import REPO
from tests.fixtures.sweep_jobs import interleaved_job, make_pool


@pytest.mark.gpu
def test_the_sweep_job_writes_the_kernel_table_of_its_point_from_each_device_profiler(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from abstraction_cost import config as config_module, tables
    from abstraction_cost.models import resnet, weights_file
    from abstraction_cost.programs import native
    from abstraction_cost.study_a.sweep import interleaved as sweep_interleaved
    config = config_module.load(REPO / "config/smoke.yaml")
    config["device"] = "cuda"
    config["study_a"]["sweep"].update(
        implementations=["eager", "libtorch", "cudnn"], batches=[2], resolutions=[16],
        transfers=["float32-pageable"], repeats=2, warmup=1,
        kernels={"batch_size": 2, "resolution": 16, "top": 3},
        protocol={"invocations": 1, "max_invocations": 1, "blocks": 2, "block_ms": 1, "warmup_max": 0,
                  "profile_calls": 2})
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    inputs = SimpleNamespace(inputs=str(make_pool(tmp_path)), weights=str(weights),
                             program_libtorch=str(native.ensure_built("libtorch")),
                             program_cudnn=str(native.ensure_built("cudnn")))
    job = interleaved_job(config, inputs, "fp32", tmp_path)
    sweep_interleaved.run(job)
    assert set(tables.read("sweep", job.output.table)["status"]) == {"ok"}
    profile = tables.read("sweep_profile", job.output.profile)
    assert (profile["device_ms"] > 0).all() and (profile["kernels"] > 0).all(), profile
    kernels = tables.read("sweep_kernels", job.output.kernels)
    assert set(kernels["status"]) == {"ok"}, kernels.filter(kernels["status"] != "ok")
    for impl in ("eager", "libtorch", "cudnn"):
        mine = kernels.filter(kernels["implementation"] == impl).sort("rank")
        assert mine.height > 3, impl   # every kernel ranked; kernels.top is the concatenation's
        assert mine["rank"].to_list() == list(range(1, mine.height + 1))
        assert mine["grid"].str.count_matches(",").to_list() == [2] * mine.height, impl   # (x,y,z)
        assert mine["block"].null_count() == 0 and (mine["total_us"] > 0).all()
        assert mine["share"].sum() == pytest.approx(1.0)
        assert mine["kernel"].str.contains("(?i)relu|clamp").any(), impl
        assert profile.filter(profile["implementation"] == impl)["device_source"][0] == mine["source"][0]
    assert kernels.select("batch_size", "resolution").unique().rows() == [(2, 16)]
