"""The same ResNet-50, proven: identical weights give the same logits on the same batch in eager, TorchScript
(Python and C++), libtorch (torch::nn in C++) and AOTInductor; and from the same weights, data and sample order,
eager and libtorch training give the same losses and weights after several SGD steps.

fp32 with TF32 off. Tolerances (stated here, checked on the CPU in CI and on the GPU machine):
- logits: max |Δ| <= LOGIT_RTOL × max |eager logits| (TorchScript, libtorch and eager run the same ATen kernels
  and agree to rounding; AOTInductor generates its own kernels and reorders sums, so it is the loosest);
- training: per-step losses within LOSS_RTOL, every weight and batch-norm statistic within WEIGHT_ATOL +
  WEIGHT_RTOL × |value| after STEPS SGD steps with momentum and weight decay (differences in summation order grow
  a little with every step).
Seen with torch 2.14 on the CPU: eager, TorchScript and libtorch logits, libtorch's losses and weights are bitwise
equal to eager's; AOTInductor's logits differ by ~1e-6 of the largest. On a GPU, cuDNN may pick different
algorithms in different processes and its weight gradients sum with atomics in no fixed order, so the weights'
absolute tolerance there is WEIGHT_ATOL_CUDA (seen on an H100: one zero-gamma batch-norm weight of 256 off by
2.4e-5 after the test's steps, while every loss agreed within LOSS_RTOL).
"""
import numpy as np
import pytest
import torch

from abstraction_cost.config import TrainingSettings
from abstraction_cost.data import order as orders
from abstraction_cost.data import offline, prepared
from abstraction_cost.data.specs import spec
from abstraction_cost.measure import device as devices
from abstraction_cost.measure.run import measured_run
from abstraction_cost.models import init, resnet, weights_file
from abstraction_cost.programs import native
from abstraction_cost.study_a import aoti, eager, torchscript
from abstraction_cost.study_a.comparison import serial as eval_job

LOGIT_RTOL = {"torchscript-python": 1e-5, "torchscript-cpp": 1e-5, "libtorch": 1e-5, "aoti": 1e-4}
LOSS_RTOL = 1e-4
WEIGHT_RTOL, WEIGHT_ATOL, WEIGHT_ATOL_CUDA = 1e-3, 1e-5, 1e-4

CHANNELS, SIZE, CLASSES = 3, 32, 10
SPEC_CONFIG = {"data": {"voc_resolution": SIZE, "digits": {"resolution": SIZE}}}  # synthetic-cifar10: 3×32×32, 10 classes
BATCH = 4
TRAIN, TEST = 12, 5
SETTINGS = TrainingSettings(epochs=2, batch_size=4, eval_batch_size=2, lr=0.01, momentum=0.9, weight_decay=1e-4)
STEPS = SETTINGS.epochs * TRAIN // SETTINGS.batch_size
BACKEND_FLAGS = {"tf32": False, "cudnn_benchmark": False}


def _config(device: str) -> dict:
    return {"device": device, "seed": 0, "backend_flags": BACKEND_FLAGS,
            "measure": {"nvml_interval_ms": 100, "warmup": 0, "repeats": 1}}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small prepared dataset with a learnable signal, init weights, and a sample order for SETTINGS."""
    root = tmp_path_factory.mktemp("parity")
    splits = offline.synthetic(spec("synthetic-cifar10", SPEC_CONFIG), TRAIN, TEST)
    manifest = prepared.write(root / "data", "synthetic-cifar10", splits, [str(i) for i in range(CLASSES)], [])
    model = init.initialise(resnet.resnet50(CHANNELS, CLASSES), "kaiming-normal-fan-out", 0)
    weights_file.save(model.state_dict(), root / "init.weights")
    # training starts from zero-gamma: with torchvision's init, evaluation after a few steps overflows (running
    # statistics have barely left mean 0, variance 1) and the eval losses to compare would be NaN
    model = init.initialise(resnet.resnet50(CHANNELS, CLASSES), "zero-gamma", 0)
    weights_file.save(model.state_dict(), root / "train.weights")
    orders.write(root / "order.i32", TRAIN, 0, SETTINGS.epochs)
    return root, manifest


def _eager_model(root, device):
    model = weights_file.load_into(resnet.resnet50(CHANNELS, CLASSES), root / "init.weights")
    return model.eval().to(device)


def _python_logits(forward, root, device, tmp_path) -> np.ndarray:
    data = prepared.load(root / "data")
    images = np.array(data.test.images[:BATCH], copy=True)
    with measured_run(_config(device), rule="test", job={}, env_path=tmp_path / f"env-{id(forward)}.parquet") as run:
        _, logits = eval_job.time_python(forward, images, data.mean, data.std, run, warmup=0, repeats=1)
    return logits


def _native_logits(program, model, root, manifest, device, tmp_path, **kw) -> np.ndarray:
    out = tmp_path / f"{model}.f32"
    command = native.eval_command(program, model, root / "data", manifest, BATCH, 1, 1,
                                  {"backend_flags": BACKEND_FLAGS}, torch.device(device), logits_out=out, **kw)
    result = native.launch(command)
    assert result.failure() is None, result.failure()
    return np.fromfile(out, "<f4").reshape(BATCH, -1)


def _all_logits(program, files, device, tmp_path) -> dict[str, np.ndarray]:
    root, manifest = files
    logits = {"eager": _python_logits(_eager_model(root, device), root, device, tmp_path)}
    meta = torchscript.save(root / "init.weights", CHANNELS, CLASSES, SIZE, tmp_path / "m.pt", tmp_path / "m.json")
    assert meta["method"] == "script", meta  # scripting works for ResNet-50; tracing would be a regression
    logits["torchscript-python"] = _python_logits(torchscript.load(tmp_path / "m.pt", torch.device(device)), root,
                                                  device, tmp_path)
    logits["torchscript-cpp"] = _native_logits(program, "torchscript", root, manifest, device, tmp_path,
                                               module=tmp_path / "m.pt")
    logits["libtorch"] = _native_logits(program, "libtorch", root, manifest, device, tmp_path,
                                        weights=root / "init.weights", classes=CLASSES)
    devices.apply_numerics(_config(device))  # the package is compiled under the compared numerics
    meta = aoti.package(root / "init.weights", CHANNELS, CLASSES, BATCH, SIZE, torch.device(device), tmp_path / "aoti")
    assert meta["status"] == "ok", meta.get("traceback")
    logits["aoti"] = _native_logits(program, "aoti", root, manifest, device, tmp_path,
                                    module=tmp_path / "aoti" / aoti.PACKAGE)
    return logits


def _assert_logits_agree(logits):
    reference = logits["eager"]
    scale = float(np.abs(reference).max())
    assert reference.shape == (BATCH, CLASSES) and scale > 0
    for name, rtol in LOGIT_RTOL.items():
        diff = float(np.abs(logits[name].astype(np.float64) - reference).max())
        assert diff <= rtol * scale, f"{name}: max |Δlogit| {diff:.3g} > {rtol} × {scale:.3g}"


def test_every_implementation_gives_eagers_logits_on_the_cpu(program, files, tmp_path):
    _assert_logits_agree(_all_logits(program, files, "cpu", tmp_path))


@pytest.mark.gpu
def test_every_implementation_gives_eagers_logits_on_the_gpu(program, files, tmp_path):
    _assert_logits_agree(_all_logits(program, files, "cuda", tmp_path))


def _eager_training(files, device, tmp_path, monkeypatch):
    """eager.train as the pipeline runs it; per-step losses recorded through PhaseStats.add."""
    root, _ = files
    model = weights_file.load_into(resnet.resnet50(CHANNELS, CLASSES), root / "train.weights")
    data = prepared.load(root / "data")
    order = orders.read(root / "order.i32", TRAIN, SETTINGS.epochs)
    step_losses = []
    add = eager.PhaseStats.add

    def recording_add(self, logits, labels, loss):
        if loss.requires_grad:  # training steps only (evaluation runs without grad)
            step_losses.append(loss.item())
        add(self, logits, labels, loss)

    monkeypatch.setattr(eager.PhaseStats, "add", recording_add)
    with measured_run(_config(device), rule="test", job={}, env_path=tmp_path / "eager-env.parquet") as run:
        rows = eager.train(model, data, order, SETTINGS, run)
    return rows, step_losses, {k: v.detach().cpu() for k, v in model.state_dict().items() if v.is_floating_point()}


def _libtorch_training(program, files, device, tmp_path):
    root, manifest = files
    command = native.train_command(program, root / "data", manifest, root / "train.weights", root / "order.i32",
                                   SETTINGS, {"backend_flags": BACKEND_FLAGS}, torch.device(device),
                                   save_weights=tmp_path / "trained.weights", log_steps=True)
    result = native.launch(command)
    assert result.failure() is None, result.failure()
    return result.of_kind("phase"), [r["loss"] for r in result.of_kind("step")], \
        weights_file.load(tmp_path / "trained.weights")


def _assert_training_agrees(program, files, device, tmp_path, monkeypatch):
    eager_rows, eager_losses, eager_state = _eager_training(files, device, tmp_path, monkeypatch)
    native_rows, native_losses, native_state = _libtorch_training(program, files, device, tmp_path)
    assert len(eager_losses) == len(native_losses) == STEPS
    np.testing.assert_allclose(native_losses, eager_losses, rtol=LOSS_RTOL)
    assert [(r["epoch"], r["phase"], r["samples"]) for r in native_rows] == \
        [(r["epoch"], r["phase"], r["samples"]) for r in eager_rows]
    for n, e in zip(native_rows, eager_rows):
        assert n["loss"] == pytest.approx(e["loss"], rel=LOSS_RTOL) and n["accuracy"] == e["accuracy"]
    assert sorted(native_state) == sorted(eager_state)
    initial = weights_file.load(files[0] / "train.weights")
    moved = 0
    for name, expected in eager_state.items():
        torch.testing.assert_close(native_state[name], expected, rtol=WEIGHT_RTOL,
                                   atol=WEIGHT_ATOL_CUDA if device == "cuda" else WEIGHT_ATOL,
                                   msg=lambda m, name=name: f"{name}: {m}")
        moved += not torch.equal(expected, initial[name])
    assert moved > len(eager_state) // 2  # training really changed the weights being compared


def test_libtorch_trains_like_eager_on_the_cpu(program, files, tmp_path, monkeypatch):
    _assert_training_agrees(program, files, "cpu", tmp_path, monkeypatch)


@pytest.mark.gpu
def test_libtorch_trains_like_eager_on_the_gpu(program, files, tmp_path, monkeypatch):
    _assert_training_agrees(program, files, "cuda", tmp_path, monkeypatch)
