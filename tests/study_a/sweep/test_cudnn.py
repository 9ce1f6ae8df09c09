"""`ac_cudnn sweep` (native/cudnn/sweep.cpp) in Study A's inference sweep.

Any machine: the command line the job launches (study_a.cudnn's algorithm flags, not torch's), bad flags refused
before the GPU opens, no GPU -> one error row per cell saying so, and the job off a CUDA device -> one not_run row
per cell with the reason. GPU: a grid walked with an injected and a real oom (the skip rule after both), times
and copied bytes of every transfer mode, `cudnn-graphs` beside `cudnn`, and the network's logits against eager at
the sweep's small resolutions (8, 16 and an odd one: every convolution and pooling output shape as torchvision's)
and at a batch beyond cuDNN's tensor size (run in passes).
With AC_SWEEP_REPORT=<file> the GPU tests' rows are written there as JSON (for the issue's numbers).
"""
from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from abstraction_cost.measure import numerics as nx
from abstraction_cost.measure.nvml import NvmlSampler
from abstraction_cost.measure.run import Run
from abstraction_cost.models import init, resnet, weights_file
from abstraction_cost.programs import native
from abstraction_cost.study_a import cudnn, transfer
from abstraction_cost.study_a.sweep import native_walk, serial as sweep
from abstraction_cost.study_a.sweep.cells import walk
from tests.fixtures.repository import REPO
from tests.fixtures.sweep_jobs import sweep_job

CHANNELS, CLASSES = 3, 10
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
CONFIG = {"backend_flags": {"tf32": False, "cudnn_benchmark": False},
          "study_a": {"cudnn": {"algo": "heuristic", "workspace_limit_mib": 1024}}}


@pytest.fixture(scope="module")
def program():
    return native.ensure_built("cudnn")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Sweep inputs as rule sweep_inputs writes them (2 images at 8, 16, 33, 512 and 1024 px) and init weights."""
    root = tmp_path_factory.mktemp("cudnn_sweep")
    images = np.random.default_rng(0).integers(0, 256, size=(2, CHANNELS, 40, 40), dtype=np.uint8)
    inputs = root / "inputs"
    inputs.mkdir()
    resolutions = [8, 16, 33, 512, 1024]
    for r in resolutions:
        transfer.resize(images, r).tofile(inputs / f"res{r}.u8")
    (inputs / transfer.MANIFEST).write_text(
        f'{{"channels": {CHANNELS}, "pool": 2, "mean": {MEAN}, "std": {STD}, "resolutions": {resolutions}}}')
    weights = root / "init.weights"
    weights_file.save(init.initialise(resnet.resnet50(CHANNELS, CLASSES), "kaiming-normal-fan-out", 0).state_dict(),
                      weights)
    return SimpleNamespace(inputs=str(inputs), weights=str(weights), root=root)


def _run(device: str = "cpu") -> Run:
    if device == "cuda":
        from abstraction_cost.measure.nvml import NvmlReader
        reader, status = NvmlReader.open(None)
        return Run(run_id=uuid.uuid4().hex[:16], device=torch.device("cuda"), sampler=NvmlSampler(reader, 20, status))
    return Run(run_id=uuid.uuid4().hex[:16], device=torch.device("cpu"), sampler=NvmlSampler(None, 50, "no GPU"))


def _report(key: str, rows: list[dict]) -> None:
    path = os.environ.get("AC_SWEEP_REPORT")
    if not path:
        return
    data = json.loads(Path(path).read_text()) if Path(path).exists() else {}
    data[key] = rows
    Path(path).write_text(json.dumps(data, indent=1, default=str))


def _command_for(program, files, implementation, batches, resolutions, transfers, repeats=3, config=CONFIG):
    settings = SimpleNamespace(batches=tuple(batches), resolutions=tuple(resolutions), transfers=tuple(transfers),
                               warmup=1, repeats=repeats, cell_budget_s=None)
    manifest = transfer.read_manifest(files.inputs)
    inputs = SimpleNamespace(inputs=files.inputs, weights=files.weights)

    def command_for(start, oom_at):
        return native_walk.sweep_command(program, implementation, inputs, manifest, settings, config,
                                         torch.device("cuda"), CLASSES, start, oom_at)
    return command_for


# ---------------------------------------------------------------------------------------------- any machine
def test_command_takes_the_cudnn_algorithm_flags(program, files):
    command = _command_for(program, files, "cudnn-graphs", [1], [8], ["uint8-pinned"])(0, "")
    assert command[1:4] == ["sweep", "--model", "cudnn-graphs"]
    assert "--cudnn-benchmark" not in command
    assert command[command.index("--conv-algo") + 1] == "heuristic"
    assert command[command.index("--workspace-limit-mib") + 1] == "1024"
    assert command[command.index("--weights") + 1] == files.weights


@pytest.mark.parametrize("numerics,flag", [("tf32", "1"), ("fp32", "0")])
def test_command_takes_the_jobs_numerics(program, files, numerics, flag):
    """study_a.sweep.numerics reaches ac_cudnn as --tf32 (CUDNN_DEFAULT_MATH and TF32 cuBLAS, or FMA math only)."""
    config = nx.job_config(CONFIG, numerics, "study_a.sweep.numerics")
    command = _command_for(program, files, "cudnn", [1], [8], ["uint8-pinned"], config=config)(0, "")
    assert command[command.index("--tf32") + 1] == flag


@pytest.mark.parametrize("flag,value,words", [
    ("--transfers", "float16-pinned", "--transfers: 'float16-pinned'"),
    ("--batches", "4,0", "--batches: '0' is not a positive integer"),
    ("--model", "libtorch", "--model: 'libtorch' is not one of cudnn, cudnn-graphs"),
    ("--conv-algo", "fastest", "--conv-algo: 'fastest'"),
    ("--pool", "0", "--pool must be >= 1"),
])
def test_bad_flags_are_refused_before_the_gpu_opens(program, files, flag, value, words):
    command = _command_for(program, files, "cudnn", [1, 2], [8], ["uint8-pinned"])(0, "")
    command[command.index(flag) + 1] = value
    proc = subprocess.run(command, capture_output=True, text=True, env={**native.runtime_env(),
                                                                         "CUDA_VISIBLE_DEVICES": ""}, timeout=60)
    assert proc.returncode == 2 and words in proc.stdout


def test_no_gpu_is_one_error_row_per_cell_saying_so(program, files, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    cells = walk([1, 2], [8, 16], ["float32-pinned"])
    rows = native_walk.native_cells(cells, _command_for(program, files, "cudnn", [1, 2], [8, 16], ["float32-pinned"]),
                                    _run(), "cudnn")
    assert [(r["cell"], r["status"]) for r in rows] == [(c.index, "error") for c in cells]
    assert all("--device cuda but this process sees no CUDA GPU" in r["message"] for r in rows)


def test_sweep_job_off_a_cuda_device_writes_not_run_rows(files, tmp_path):
    from abstraction_cost import config as config_module, tables
    config = config_module.load(REPO / "config/smoke.yaml")  # device cpu, require_gpu false
    config["study_a"]["sweep"].update(batches=[1, 2], resolutions=[8, 16], repeats=2, warmup=0)
    inputs = SimpleNamespace(inputs=files.inputs, weights=files.weights, program="ac_cudnn")
    job = sweep_job(config, inputs, "cudnn", tmp_path)
    sweep.run(job)
    df = tables.read("sweep", job.output.tables[0])
    assert df["cell"].to_list() == list(range(8)) and set(df["status"]) == {"not_run"}
    assert set(df["message"]) == {cudnn.NOT_RUN_REASON.format(device="cpu")}
    assert set(df["backend"]) == {"cudnn"} and set(df["runtime"]) == {"cpp"}


# ------------------------------------------------------------------------------------------------------ GPU
@pytest.mark.gpu
@pytest.mark.parametrize("implementation", ["cudnn", "cudnn-graphs"])
def test_sweep_records_injected_and_real_oom_and_goes_on(program, files, monkeypatch, implementation):
    """Cell 1 an injected oom, batch 64 at 512 px a real one: no batch within cuDNN's 2^31 elements per tensor
    exhausts an H100 (five such buffers are 40 GiB), so this process holds all but 3 GiB of the device while the
    program runs, and the cell's five 1 GiB activation buffers do not fit. Larger batches at each resolution are
    skipped, the others measured."""
    monkeypatch.setenv("AC_FAULT", "cell:oom@1")
    batches, resolutions = [2, 64, 128], [16, 512]
    cells = walk(batches, resolutions, ["uint8-pinned"])
    run = _run("cuda")
    free, _ = torch.cuda.mem_get_info()
    hog = torch.empty(free - 3 * 2**30, dtype=torch.uint8, device="cuda")
    try:
        with run.sampler:
            rows = native_walk.native_cells(cells, _command_for(program, files, implementation, batches, resolutions,
                                                                ["uint8-pinned"]), run, implementation)
    finally:
        del hog
        torch.cuda.empty_cache()
    _report(f"oom/{implementation}", rows)
    assert [r["status"] for r in rows] == ["ok", "oom", "oom", "ok", "oom", "oom"], rows
    assert rows[1]["message"] == "injected out of memory (AC_FAULT)"
    assert "out of device memory" in rows[4]["message"], rows[4]
    for i in (2, 5):
        assert rows[i]["message"] == "skipped: batch 64 already out of memory at this resolution"
    for i, r in ((0, 16), (3, 512)):
        assert rows[i]["time_ms"] > 0 and rows[i]["h2d_ms"] > 0 and rows[i]["alloc_peak_mib"] > 0
        assert rows[i]["h2d_bytes"] == 2 * CHANNELS * r * r
    assert rows[3]["alloc_peak_mib"] > rows[0]["alloc_peak_mib"]  # its own activations, not the last cell's


@pytest.mark.gpu
@pytest.mark.parametrize("numerics", ["fp32", "tf32"])
def test_sweep_runs_under_the_jobs_numerics(program, files, numerics):
    """ac_cudnn's start record says which math it set up (tf32 from --tf32): a tf32 row ran with TF32 allowed."""
    config = nx.job_config(CONFIG, numerics, "study_a.sweep.numerics")
    result = native.launch(_command_for(program, files, "cudnn", [2], [16], ["uint8-pinned"], config=config)(0, ""))
    assert result.returncode == 0, result.stderr_tail
    assert result.of_kind("start")[0]["tf32"] is (numerics == "tf32")
    assert [r["status"] for r in result.of_kind("cell")] == ["ok"]


@pytest.mark.gpu
def test_every_transfer_mode_copies_its_bytes_in_one_process(program, files):
    """The three modes of each shape back to back in one program: each copies its dtype's bytes, within the call
    it is timed in."""
    batches, resolutions, modes = [1, 4], [8, 33], ["float32-pageable", "float32-pinned", "uint8-pinned"]
    run = _run("cuda")
    with run.sampler:
        rows = native_walk.native_cells(walk(batches, resolutions, modes),
                                        _command_for(program, files, "cudnn", batches, resolutions, modes), run)
    _report("transfer", rows)
    assert [r["status"] for r in rows] == ["ok"] * 12, rows
    assert [r["transfer"] for r in rows] == modes * 4
    for r in rows:
        itemsize = 1 if r["transfer"] == "uint8-pinned" else 4
        assert r["h2d_bytes"] == r["batch_size"] * CHANNELS * r["resolution"] ** 2 * itemsize
        assert r["time_ms"] > 0 and r["time_per_sample_ms"] == pytest.approx(r["time_ms"] / r["batch_size"])
        assert 0 < r["h2d_ms"] < r["time_ms"]


def _cudnn_and_eager_logits(program, files, images: np.ndarray, size: int, name: str):
    """`ac_cudnn eval` of `images` as one batch, and eager's logits of the same batch (fp32, TF32 off)."""
    count = len(images)
    images_path, logits_path = files.root / f"{name}.u8", files.root / f"{name}.f32"
    images.tofile(images_path)
    command = [program, "eval", "--device", "cuda", "--tf32", "0", "--conv-algo", "heuristic",
               "--workspace-limit-mib", "1024", "--model", "cudnn", "--channels", CHANNELS, "--height", size,
               "--width", size, "--classes", CLASSES, "--count", count, "--batch-size", count, "--warmup", 0,
               "--repeats", 1, "--images", images_path, "--mean", ",".join(map(str, MEAN)),
               "--std", ",".join(map(str, STD)), "--weights", files.weights, "--logits-out", logits_path]
    proc = subprocess.run([str(c) for c in command], capture_output=True, text=True, env=native.runtime_env(),
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = np.fromfile(logits_path, dtype=np.float32).reshape(count, CLASSES)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    model = weights_file.load_into(resnet.resnet50(CHANNELS, CLASSES), files.weights).eval().cuda()
    x = torch.from_numpy(images).cuda().float() / 255
    x = (x - torch.tensor(MEAN, device="cuda").view(1, -1, 1, 1)) / torch.tensor(STD, device="cuda").view(1, -1, 1, 1)
    with torch.no_grad():
        want = model(x).cpu().numpy()
    del model, x
    torch.cuda.empty_cache()
    return got, want


@pytest.mark.gpu
@pytest.mark.parametrize("size", [8, 16, 33])
def test_logits_equal_eager_at_small_resolutions(program, files, size):
    """ac_cudnn eval at the sweep's small resolutions: the same output shapes as torchvision's at every layer
    (else the logits could not agree), logits within 1e-4 of the largest."""
    images = np.fromfile(Path(files.inputs) / f"res{size}.u8", dtype=np.uint8).reshape(2, CHANNELS, size, size)
    got, want = _cudnn_and_eager_logits(program, files, images, size, f"small{size}")
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), (got, want)


@pytest.mark.gpu
def test_a_batch_beyond_cudnns_tensor_size_runs_in_passes_with_eagers_logits(program, files):
    """Batch 130 at 1024 px: the stem's output would have 130 × 64 × 512² > 2^31 - 1 elements, more than a cuDNN
    tensor may hold, so evaluation runs it as two passes of 65 (as torch splits such a batch); every image's logits
    are still eager's within 1e-4 of the largest, the second pass's included."""
    pool = np.fromfile(Path(files.inputs) / "res1024.u8", dtype=np.uint8).reshape(2, CHANNELS, 1024, 1024)
    images = np.concatenate([pool, pool[:, :, ::-1]] * 33)[:130]  # distinct neighbours, so an offset shows
    got, want = _cudnn_and_eager_logits(program, files, np.ascontiguousarray(images), 1024, "split1024")
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), np.abs(got - want).max(axis=1)
