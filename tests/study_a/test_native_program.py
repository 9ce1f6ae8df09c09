"""ac_libtorch itself (built against this machine's torch on first use): its flags, its readers' errors, its
records and its clock. Numerical agreement with eager is tests/study_a/test_parity.py's."""
import json
import subprocess
import time

import numpy as np
import pytest
import torch

from abstraction_cost.config import TrainingSettings
from abstraction_cost.data import offline, order, prepared
from abstraction_cost.data.specs import spec
from abstraction_cost.models import init, resnet, weights_file
from abstraction_cost.programs import native

CHANNELS, SIZE, CLASSES = 3, 32, 10
SPEC_CONFIG = {"data": {"voc_resolution": SIZE, "digits": {"resolution": SIZE}}}  # synthetic-cifar10: 3×32×32, 10 classes


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("native_program")
    splits = offline.synthetic(spec("synthetic-cifar10", SPEC_CONFIG), 6, 3)
    manifest = prepared.write(root / "data", "synthetic-cifar10", splits, [str(i) for i in range(CLASSES)], [])
    # zero-gamma: with torchvision's init, eval after a couple of steps overflows (running statistics have barely
    # moved from mean 0, variance 1), and the phase records' losses would be NaN
    model = init.initialise(resnet.resnet50(CHANNELS, CLASSES), "zero-gamma", 0)
    weights_file.save(model.state_dict(), root / "w.weights")
    order.write(root / "order.i32", 6, 0, 1)
    return root, manifest


def _run(command, **env):
    proc = subprocess.run([str(c) for c in command], capture_output=True, text=True,
                          env={**native.runtime_env(), **env}, timeout=300)
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc, records


def _train(program, files, **overrides):
    root, manifest = files
    settings = TrainingSettings(epochs=1, batch_size=4, eval_batch_size=2, lr=0.01, momentum=0.9, weight_decay=0.0)
    return native.train_command(program, root / "data", manifest, overrides.get("weights", root / "w.weights"),
                                overrides.get("order", root / "order.i32"), settings,
                                {"backend_flags": {"tf32": False, "cudnn_benchmark": False}}, torch.device("cpu"))


def test_train_writes_one_phase_record_per_epoch_and_phase_with_the_tables_fields(program, files):
    before = time.monotonic()
    proc, records = _run(_train(program, files))
    after = time.monotonic()
    assert proc.returncode == 0, proc.stderr
    start, *phases = records
    assert start["kind"] == "start" and start["device"] == "cpu"
    assert before <= start["monotonic_s"] <= after  # the program's clock is the sampler's clock
    assert [(r["kind"], r["epoch"], r["phase"]) for r in phases] == [("phase", 0, "train"), ("phase", 0, "eval")]
    train, evaluation = phases
    assert train["samples"] == 6 and evaluation["samples"] == 3  # last partial batches are kept
    for r in phases:
        assert set(native.TRAINING_FIELDS) <= set(r) and r["alloc_peak_mib"] is None  # no allocator on the CPU
        assert before <= r["start_monotonic_s"] < r["end_monotonic_s"] <= after
        assert 0 < r["time_s"] <= r["wall_s"]
        assert r["time_per_sample_ms"] == pytest.approx(1000 * r["time_s"] / r["samples"])
        assert np.isfinite(r["loss"]) and 0 <= r["accuracy"] <= 1


def test_unknown_and_missing_flags_are_named(program, files):
    proc, records = _run(_train(program, files) + ["--learning-rate", "0.1"])
    assert proc.returncode == 2 and records[-1] == {"kind": "error", "status": "error",
                                                    "message": "unknown flag(s): --learning-rate"}
    command = _train(program, files)
    i = command.index("--order")
    proc, records = _run(command[:i] + command[i + 2:])
    assert proc.returncode == 2 and records[-1]["message"] == "missing flag --order"


def test_a_sample_order_of_the_wrong_size_names_the_file(program, files, tmp_path):
    bad = tmp_path / "short.i32"
    np.arange(5, dtype="<i4").tofile(bad)
    proc, records = _run(_train(program, files, order=bad))
    assert proc.returncode == 1
    assert str(bad) in records[-1]["message"] and "20 bytes, expected 24" in records[-1]["message"]


def test_weights_of_another_model_are_refused_with_the_tensor_named(program, files, tmp_path):
    other = tmp_path / "other.weights"
    weights_file.save(resnet.resnet50(1, CLASSES).state_dict(), other)  # a 1-channel stem
    proc, records = _run(_train(program, files, weights=other))
    assert proc.returncode == 1
    assert "conv1.weight has shape (64, 1, 7, 7), the model expects (64, 3, 7, 7)" in records[-1]["message"]


def test_a_corrupt_weights_file_is_refused(program, files, tmp_path):
    bad = tmp_path / "bad.weights"
    bad.write_bytes(b"NOPE" + bytes(20))
    proc, records = _run(_train(program, files, weights=bad))
    assert proc.returncode == 1 and "not a weights file" in records[-1]["message"]


def test_cuda_without_a_gpu_is_a_clear_error(program, files):
    command = _train(program, files)
    command[command.index("--device") + 1] = "cuda"
    proc, records = _run(command, CUDA_VISIBLE_DEVICES="")   # no GPU visible, even on a machine with one
    assert proc.returncode == 1 and "sees no CUDA GPU" in records[-1]["message"]


def test_eval_writes_times_and_logits(program, files, tmp_path):
    root, manifest = files
    logits = tmp_path / "logits.f32"
    command = native.eval_command(program, "libtorch", root / "data", manifest, 2, 1, 3,
                                  {"backend_flags": {"tf32": False, "cudnn_benchmark": False}}, torch.device("cpu"),
                                  logits_out=logits, weights=root / "w.weights", classes=CLASSES)
    proc, records = _run(command)
    assert proc.returncode == 0, proc.stderr
    record = records[-1]
    assert record["kind"] == "eval" and record["repeats"] == 3 and len(record["times_ms"]) == 3
    assert all(t > 0 for t in record["times_ms"]) and record["classes"] == CLASSES
    assert np.fromfile(logits, "<f4").shape == (2 * CLASSES,)


def test_eval_refuses_a_batch_larger_than_the_input(program, files):
    root, manifest = files
    command = native.eval_command(program, "libtorch", root / "data", manifest, 5, 0, 1,
                                  {"backend_flags": {"tf32": False, "cudnn_benchmark": False}}, torch.device("cpu"),
                                  weights=root / "w.weights", classes=CLASSES)
    proc, records = _run(command)
    assert proc.returncode == 2 and "--batch-size 5 must be in 1..--count (3)" in records[-1]["message"]
