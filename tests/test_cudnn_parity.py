"""The same ResNet-50, proven, for the hand-written cuDNN/cuBLAS program (native/cudnn) against eager on a GPU,
fp32 with TF32 off:
- logits: same init weights, same batch -> max |Δ| <= LOGIT_RTOL × max |eager logits|, for `cudnn` and
  `cudnn-graphs`, with heuristic and measured (find) convolution algorithms;
- training: from the same zero-gamma weights, data and sample order, STEPS SGD steps (momentum, weight decay) ->
  per-step losses within LOSS_RTOL, phase losses and accuracies as eager's, every weight and batch-norm statistic
  within WEIGHT_ATOL + WEIGHT_RTOL × |value| (cuDNN's weight gradients sum in an order of their own, with
  atomics in some algorithms: test_parity.py's GPU tolerance for libtorch, which runs the same cuDNN);
- compute-sanitizer memcheck finds no error in one training step with its evaluation, and in one evaluation.
With AC_PARITY_REPORT=<file> the measured differences are written there as JSON (for the issue's numbers).
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from abstraction_cost.backends import cudnn, eager, eval_job, native
from abstraction_cost.config import TrainingSettings
from abstraction_cost.data import offline, prepared
from abstraction_cost.data import order as orders
from abstraction_cost.data.specs import spec
from abstraction_cost.measure.run import measured_run
from abstraction_cost.models import init, resnet, weights_file

LOGIT_RTOL = 1e-4
LOSS_RTOL = 1e-4
WEIGHT_RTOL, WEIGHT_ATOL = 1e-3, 1e-4

CHANNELS, SIZE, CLASSES = 3, 32, 10
SPEC_CONFIG = {"data": {"voc_resolution": SIZE, "digits": {"resolution": SIZE}}}  # synthetic-cifar10: 3×32×32
BATCH, TRAIN, TEST = 4, 12, 5
SETTINGS = TrainingSettings(epochs=1, batch_size=4, eval_batch_size=2, lr=0.01, momentum=0.9, weight_decay=1e-4)
STEPS = SETTINGS.epochs * TRAIN // SETTINGS.batch_size  # 3
NUMERICS = {"tf32": False, "cudnn_benchmark": False}


def _config(algo: str = "heuristic") -> dict:
    return {"device": "cuda", "seed": 0, "numerics": NUMERICS,
            "measure": {"nvml_interval_ms": 100, "warmup": 0, "repeats": 1},
            "study_a": {"cudnn": {"algo": algo, "workspace_limit_mib": 1024}}}


def _report(key: str, value) -> None:
    path = os.environ.get("AC_PARITY_REPORT")
    if not path:
        return
    data = json.loads(Path(path).read_text()) if Path(path).exists() else {}
    data[key] = value
    Path(path).write_text(json.dumps(data, indent=1))


@pytest.fixture(scope="module")
def program():
    return native.ensure_built("cudnn")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("cudnn_parity")
    splits = offline.synthetic(spec("synthetic-cifar10", SPEC_CONFIG), TRAIN, TEST)
    manifest = prepared.write(root / "data", "synthetic-cifar10", splits, [str(i) for i in range(CLASSES)], [])
    weights_file.save(init.initialise(resnet.resnet50(CHANNELS, CLASSES), "kaiming-normal-fan-out", 0).state_dict(),
                      root / "init.weights")
    # zero-gamma for training, as test_parity.py: evaluation after torchvision's init overflows after a few steps
    weights_file.save(init.initialise(resnet.resnet50(CHANNELS, CLASSES), "zero-gamma", 0).state_dict(),
                      root / "train.weights")
    orders.write(root / "order.i32", TRAIN, 0, SETTINGS.epochs)
    return root, manifest


def _eager_logits(root, tmp_path) -> np.ndarray:
    model = weights_file.load_into(resnet.resnet50(CHANNELS, CLASSES), root / "init.weights").eval().cuda()
    data = prepared.load(root / "data")
    images = np.array(data.test.images[:BATCH], copy=True)
    with measured_run(_config(), rule="test", job={}, env_path=tmp_path / "eager-env.parquet") as run:
        _, logits = eval_job.time_python(model, images, data.mean, data.std, run, warmup=0, repeats=1)
    return logits


@pytest.mark.gpu
@pytest.mark.parametrize("implementation", cudnn.IMPLEMENTATIONS)
@pytest.mark.parametrize("algo", ["heuristic", "find"])
def test_cudnn_gives_eagers_logits(program, files, tmp_path, implementation, algo):
    root, manifest = files
    reference = _eager_logits(root, tmp_path)
    out = tmp_path / "logits.f32"
    command = cudnn.eval_command(program, implementation, root / "data", manifest, BATCH, 1, 3, _config(algo),
                                 torch.device("cuda"), weights=root / "init.weights", classes=CLASSES, logits_out=out)
    result = native.launch(command)
    assert result.failure() is None, result.failure()
    record = result.of_kind("eval")[-1]
    assert record["conv_algo"] == algo and record["workspace_mib"] >= 0 and len(record["times_ms"]) == 3
    logits = np.fromfile(out, "<f4").reshape(BATCH, CLASSES)
    scale = float(np.abs(reference).max())
    diff = float(np.abs(logits.astype(np.float64) - reference).max())
    _report(f"logits/{implementation}/{algo}", {"max_abs_diff": diff, "max_abs_logit": scale,
                                                "relative": diff / scale})
    assert diff <= LOGIT_RTOL * scale, f"max |Δlogit| {diff:.3g} > {LOGIT_RTOL} × {scale:.3g}"


def _eager_training(root, tmp_path, monkeypatch):
    model = weights_file.load_into(resnet.resnet50(CHANNELS, CLASSES), root / "train.weights")
    data = prepared.load(root / "data")
    order = orders.read(root / "order.i32", TRAIN, SETTINGS.epochs)
    step_losses = []
    add = eager.PhaseStats.add

    def recording_add(self, logits, labels, loss):
        if loss.requires_grad:
            step_losses.append(loss.item())
        add(self, logits, labels, loss)

    monkeypatch.setattr(eager.PhaseStats, "add", recording_add)
    with measured_run(_config(), rule="test", job={}, env_path=tmp_path / "eager-train-env.parquet") as run:
        rows = eager.train(model, data, order, SETTINGS, run)
    return rows, step_losses, {k: v.detach().cpu() for k, v in model.state_dict().items() if v.is_floating_point()}


@pytest.mark.gpu
@pytest.mark.parametrize("graphs", [False, True], ids=["cudnn", "cudnn-graphs"])
def test_cudnn_trains_like_eager(program, files, tmp_path, monkeypatch, graphs):
    root, manifest = files
    eager_rows, eager_losses, eager_state = _eager_training(root, tmp_path, monkeypatch)
    command = cudnn.train_command(program, root / "data", manifest, root / "train.weights", root / "order.i32",
                                  SETTINGS, _config(), torch.device("cuda"), graphs=graphs,
                                  save_weights=tmp_path / "trained.weights", log_steps=True)
    result = native.launch(command)
    assert result.failure() is None, result.failure()
    rows, losses = result.of_kind("phase"), [r["loss"] for r in result.of_kind("step")]
    state = weights_file.load(tmp_path / "trained.weights")
    assert len(eager_losses) == len(losses) == STEPS
    loss_rel = float(np.max(np.abs(np.subtract(losses, eager_losses)) / np.abs(eager_losses)))
    worst = max((float(((state[k] - v).abs() / (WEIGHT_ATOL + WEIGHT_RTOL * v.abs())).max()), k)
                for k, v in eager_state.items())
    max_abs = max(float((state[k] - v).abs().max()) for k, v in eager_state.items())
    _report(f"training/{'cudnn-graphs' if graphs else 'cudnn'}",
            {"losses": losses, "eager_losses": eager_losses, "max_loss_relative_diff": loss_rel,
             "max_weight_abs_diff": max_abs, "worst_weight_over_tolerance": worst[0], "worst_tensor": worst[1],
             "phases": [(r["phase"], r["loss"], r["accuracy"]) for r in rows],
             "eager_phases": [(r["phase"], r["loss"], r["accuracy"]) for r in eager_rows]})
    np.testing.assert_allclose(losses, eager_losses, rtol=LOSS_RTOL)
    assert [(r["epoch"], r["phase"], r["samples"]) for r in rows] == \
        [(r["epoch"], r["phase"], r["samples"]) for r in eager_rows]
    for n, e in zip(rows, eager_rows):
        assert n["loss"] == pytest.approx(e["loss"], rel=LOSS_RTOL) and n["accuracy"] == e["accuracy"]
        assert n["conv_algo"] == "heuristic" and n["alloc_peak_mib"] > 0
    assert sorted(state) == sorted(eager_state)
    initial = weights_file.load(root / "train.weights")
    moved = 0
    for name, expected in eager_state.items():
        torch.testing.assert_close(state[name], expected, rtol=WEIGHT_RTOL, atol=WEIGHT_ATOL,
                                   msg=lambda m, name=name: f"{name}: {m}")
        moved += not torch.equal(expected, initial[name])
    assert moved > len(eager_state) // 2  # training really changed the weights being compared


def _sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    for candidate in (found, "/usr/local/cuda/bin/compute-sanitizer",
                      "/usr/local/cuda/compute-sanitizer/compute-sanitizer"):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


@pytest.mark.gpu
@pytest.mark.parametrize("subcommand", ["train", "eval"])
def test_memcheck_finds_no_error(program, files, tmp_path, subcommand):
    sanitizer = _sanitizer()
    if sanitizer is None:
        pytest.skip("compute-sanitizer is not installed (it comes with the CUDA toolkit)")
    root, manifest = files
    if subcommand == "train":  # one training step (the whole split in one batch) and one evaluation batch
        one_step = TrainingSettings(epochs=1, batch_size=TRAIN, eval_batch_size=TEST, lr=0.01, momentum=0.9,
                                    weight_decay=1e-4)
        command = cudnn.train_command(program, root / "data", manifest, root / "train.weights", root / "order.i32",
                                      one_step, _config(), torch.device("cuda"))
    else:
        command = cudnn.eval_command(program, "cudnn", root / "data", manifest, BATCH, 0, 1, _config(),
                                     torch.device("cuda"), weights=root / "init.weights", classes=CLASSES)
    proc = subprocess.run([sanitizer, "--tool", "memcheck", "--error-exitcode", "99", *command],
                          capture_output=True, text=True, env=native.runtime_env(), timeout=400)
    summary = [line for line in proc.stdout.splitlines() if "ERROR SUMMARY" in line]
    _report(f"memcheck/{subcommand}", {"returncode": proc.returncode, "summary": summary})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert summary and "ERROR SUMMARY: 0 errors" in summary[-1]
