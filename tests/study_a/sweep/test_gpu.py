"""The sweep on a CUDA GPU: real out-of-memory cells in Python and C++, transfer modes, dynamic compilation."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from abstraction_cost.measure.nvml import NvmlSampler
from abstraction_cost.measure.run import Run
from abstraction_cost.programs import native
from abstraction_cost.study_a import transfer
from abstraction_cost.study_a.sweep import cells as sweep_cells, native_walk, python_model, python_walk
from abstraction_cost.study_a.sweep.cells import walk

from tests.fixtures.repository import REPO
from tests.fixtures.sweep_fakes import pool_dir, TinyModel  # noqa: F401 (fixtures)


class GreedyModel(TinyModel):
    """Asks the CUDA allocator for 1 TiB from batch 4 on: a real out-of-memory error, not an injected one."""

    def __init__(self):
        super().__init__()
        conv = self.forward.cuda()
        self.forward = lambda x: torch.empty(1 << 40, dtype=torch.uint8, device=x.device) if x.shape[0] >= 4 \
            else conv(x)


def _cuda_run() -> Run:
    from abstraction_cost.measure.nvml import NvmlReader
    reader, status = NvmlReader.open(None)
    return Run(run_id="gpu-test", device=torch.device("cuda"), sampler=NvmlSampler(reader, 20, status))


@pytest.mark.gpu
def test_python_sweep_on_cuda_records_a_real_oom_and_goes_on(pool_dir):
    run = _cuda_run()
    with run.sampler:
        rows = python_walk.python_cells(GreedyModel(), walk([2, 4, 8], [8, 16], ["float32-pinned"]),
                                        transfer.Pool(pool_dir), 1, 3, run)
    assert [r["status"] for r in rows] == ["ok", "oom", "oom", "ok", "oom", "oom"]
    assert "out of memory" in rows[1]["message"].lower() and rows[2]["message"] == \
        "skipped: batch 4 already out of memory at this resolution"
    assert rows[3]["alloc_peak_mib"] is not None and rows[3]["h2d_bytes"] == 2 * 3 * 16 * 16 * 4
    assert torch.cuda.memory_allocated() < 1 << 30  # the failed cells' memory was released


class GreedyScript(torch.nn.Module):
    """A TorchScript module asking the allocator for 1 TiB from batch 4 on."""

    def forward(self, x):
        if x.shape[0] >= 4:
            return torch.empty([1 << 40], dtype=torch.uint8, device=x.device).float()[:5].expand(x.shape[0], 5)
        return x.flatten(1)[:, :5]


@pytest.mark.gpu
def test_an_oom_inside_a_torchscript_module_is_oom_in_python_and_in_cpp(pool_dir, tmp_path):
    """The interpreter wraps torch's OutOfMemoryError in its own error, in Python as in ac_libtorch (and an
    AOTInductor package's runner does the same); the allocator's oom count makes both an oom cell."""
    module = torch.jit.script(GreedyScript())
    module.save(str(tmp_path / "greedy.pt"))
    cells = walk([2, 4, 8], [8], ["float32-pinned"])
    model = TinyModel()
    model.forward = module.cuda()
    run = _cuda_run()
    with run.sampler:
        rows = python_walk.python_cells(model, cells, transfer.Pool(pool_dir), 1, 2, run)
    assert [r["status"] for r in rows] == ["ok", "oom", "oom"], [r["message"] for r in rows]
    assert rows[1]["message"].startswith("CUDA out of memory. Tried to allocate 1024.00 GiB")
    program = native.ensure_built("libtorch")
    settings = SimpleNamespace(batches=(2, 4, 8), resolutions=(8,), transfers=("float32-pinned",), warmup=1,
                               repeats=2, cell_budget_s=None)
    inputs = SimpleNamespace(inputs=str(pool_dir), module=str(tmp_path / "greedy.pt"))
    config = {"backend_flags": {"tf32": False, "cudnn_benchmark": False}}
    rows = native_walk.native_cells(cells, lambda start, oom_at: native_walk.sweep_command(
        program, "torchscript-cpp", inputs, transfer.read_manifest(pool_dir), settings, config, torch.device("cuda"),
        5, start, oom_at), _cuda_run(), "torchscript-cpp")
    assert [r["status"] for r in rows] == ["ok", "oom", "oom"], [r["message"] for r in rows]
    assert rows[1]["message"].startswith("CUDA out of memory. Tried to allocate 1024.00 GiB")


@pytest.mark.gpu
def test_transfer_modes_on_cuda_pin_and_normalise_alike(pool_dir):
    pool = transfer.Pool(pool_dir)
    inputs = {m: transfer.cell_input(pool, 32, 16, m, torch.device("cuda")) for m in sweep_cells.TRANSFERS}
    for data in inputs.values():
        data.load(pool)
    assert [inputs[m].host.is_pinned() for m in sweep_cells.TRANSFERS] == [False, True, True]
    assert inputs["uint8-pinned"].nbytes * 4 == inputs["float32-pageable"].nbytes == 32 * 3 * 16 * 16 * 4
    x = {m: d.to_device() for m, d in inputs.items()}
    torch.cuda.synchronize()
    torch.testing.assert_close(x["uint8-pinned"], x["float32-pageable"])
    torch.testing.assert_close(x["float32-pinned"], x["float32-pageable"])


@pytest.mark.gpu
def test_dynamic_compile_on_cuda_times_every_shape_after_one_checked_build(pool_dir, tmp_path):
    """A real dynamic-shape torch.compile of ResNet-50 over two resolutions and batches: every cell passes the
    output check against eager and is timed, and each shape's first call (the compile, or a recompile where a
    size-1 dimension is specialised) is timed apart."""
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    model = python_model.PythonModel("compiled-default", SimpleNamespace(weights=str(weights)), 3, 10,
                                     torch.device("cuda"), compile_shapes="dynamic")
    run = _cuda_run()
    with run.sampler:
        rows = python_walk.python_cells(model, walk([2, 4], [8, 16], ["uint8-pinned"]), transfer.Pool(pool_dir), 1, 3,
                                        run)
    assert [r["status"] for r in rows] == ["ok"] * 4, [r.get("message") for r in rows]
    assert all(r["time_ms"] > 0 for r in rows)
    assert all(r["build_s"] > 0 for r in rows)


@pytest.mark.gpu
def test_a_fresh_worker_builds_from_what_the_compile_warm_up_compiled(pool_dir, tmp_path, monkeypatch):
    """compile_warm_up.warm: the sweep's own worker (its spec, its thread count) compiles a dynamic build of
    ResNet-50 at two shapes into a cache; a fresh worker of the same spec then loads the same cells from that
    cache: every compiled graph a hit, none a miss."""
    from abstraction_cost import config as config_module
    from abstraction_cost.compile import inductor_env
    from abstraction_cost.models import resnet, weights_file
    from abstraction_cost.programs import fork_server
    from abstraction_cost.study_a.sweep import compile_warm_up, conductor, interleaved
    from abstraction_cost.study_a.sweep.cells import PROTOCOL_DEFAULTS, Protocol, SweepSettings
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    monkeypatch.setenv(fork_server.DISABLE_ENV, "0")   # started directly, in this environment
    for var, value in {**inductor_env.job_thread_env(), **inductor_env.cache_env(str(tmp_path / "cache"), 4)}.items():
        monkeypatch.setenv(var, value)
    settings = SweepSettings(batches=(2,), resolutions=(8, 16), warmup=0, repeats=1, transfers=("float32-pageable",),
                             implementations=("compiled",), compile_modes=("default",), pool=2, kernel_batch=2,
                             kernel_resolution=16, kernel_top=1, require_gpu=True, compile_shapes="dynamic")
    config = config_module.load(REPO / "config/gpu-smoke.yaml")
    spec = interleaved.python_spec("compiled-default", {"inputs": str(pool_dir), "weights": str(weights)}, 10,
                                   torch.device("cuda"), "fp32", settings, Protocol(**PROTOCOL_DEFAULTS), config)
    command = conductor.python_worker_command(spec, tmp_path)
    cells = settings.cells()
    cold = compile_warm_up.warm(["compiled-default"], lambda impl: command(""), cells)["compiled-default"]
    warm = compile_warm_up.warm(["compiled-default"], lambda impl: command(""), cells)["compiled-default"]
    assert [b["status"] for b in cold + warm] == ["ok"] * 4, [b["message"] for b in cold + warm]
    count = lambda builds, key: sum(b[key] or 0 for b in builds)  # noqa: E731 - a shape's build may be one run
    assert count(cold, "cache_misses") > 0 and count(cold, "cache_hits") == 0, cold
    assert count(warm, "cache_hits") > 0 and count(warm, "cache_misses") == 0, warm
