"""ac_cudnn (native/cudnn) on any machine: it builds with nvcc and the pip cuDNN/cuBLAS headers, and every input
it cannot use is a clear error record (the file, the tensor or the flag named) with ac_libtorch's exit codes:
no GPU, a weights file of another model or version, a prepared directory that does not match, bad flags.
Numerical agreement with eager on a GPU is tests/study_a/test_cudnn_parity.py's."""
import json
import subprocess
import struct

import numpy as np
import pytest
import torch

from abstraction_cost.config import TrainingSettings
from abstraction_cost.data import offline, order, prepared
from abstraction_cost.data.specs import spec
from abstraction_cost.models import init, resnet, weights_file
from abstraction_cost.programs import native
from abstraction_cost.study_a import cudnn

CHANNELS, SIZE, CLASSES = 3, 32, 10
SPEC_CONFIG = {"data": {"voc_resolution": SIZE, "digits": {"resolution": SIZE}}}  # synthetic-cifar10: 3×32×32
CONFIG = {"backend_flags": {"tf32": False, "cudnn_benchmark": False},
          "study_a": {"cudnn": {"algo": "heuristic", "workspace_limit_mib": 1024}}}
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # no GPU visible, even on a machine with one


@pytest.fixture(scope="module")
def program():
    return native.ensure_built("cudnn")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("cudnn_program")
    splits = offline.synthetic(spec("synthetic-cifar10", SPEC_CONFIG), 6, 3)
    manifest = prepared.write(root / "data", "synthetic-cifar10", splits, [str(i) for i in range(CLASSES)], [])
    weights_file.save(init.initialise(resnet.resnet50(CHANNELS, CLASSES), "zero-gamma", 0).state_dict(),
                      root / "w.weights")
    order.write(root / "order.i32", 6, 0, 1)
    return root, manifest


def _run(command, **env):
    proc = subprocess.run([str(c) for c in command], capture_output=True, text=True,
                          env={**native.runtime_env(), **env}, timeout=120)
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc, records


def _train(program, files, device="cuda", **overrides):
    root, manifest = files
    settings = TrainingSettings(epochs=1, batch_size=4, eval_batch_size=2, lr=0.01, momentum=0.9, weight_decay=0.0)
    return cudnn.train_command(program, overrides.get("data", root / "data"), manifest,
                               overrides.get("weights", root / "w.weights"), overrides.get("order", root / "order.i32"),
                               settings, overrides.get("config", CONFIG), torch.device(device))


def _eval(program, files, batch=2, weights=None, implementation="cudnn"):
    root, manifest = files
    return cudnn.eval_command(program, implementation, root / "data", manifest, batch, 1, 3, CONFIG,
                              torch.device("cuda"), weights=weights or root / "w.weights", classes=CLASSES)


def _error(proc, records, code):
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert records and records[-1]["kind"] == "error", proc.stdout
    return records[-1]["message"]


def test_the_program_is_built_with_nvcc_against_the_wheels_cudnn(program):
    assert program.name == "ac_cudnn" and program.is_file()
    command = native.cmake_configure_command(native.SOURCE_DIR / "cudnn", native.BUILD_DIR / "cudnn")
    assert any(flag.startswith("-DAC_NVIDIA_HINTS=") and "cudnn" in flag for flag in command)


def test_the_command_takes_the_algorithm_choice_instead_of_torchs_benchmark_switch(program, files):
    command = _train(program, files)
    assert "--cudnn-benchmark" not in command
    i = command.index("--conv-algo")
    assert command[i:i + 4] == ["--conv-algo", "heuristic", "--workspace-limit-mib", "1024"]
    assert _train(program, files)[-2:] != ["--graphs", "1"]
    assert cudnn.train_command(program, files[0] / "data", files[1], "w", "o", TrainingSettings(1, 4, 2, 0.1, 0.9, 0.0),
                               CONFIG, torch.device("cuda"), graphs=True)[-2:] == ["--graphs", "1"]
    with pytest.raises(ValueError, match="not one of"):
        cudnn.eval_command(program, "libtorch", files[0] / "data", files[1], 2, 0, 1, CONFIG, torch.device("cuda"),
                           weights="w", classes=CLASSES)


@pytest.mark.parametrize("subcommand", ["train", "eval"])
def test_without_a_gpu_the_error_says_so(program, files, subcommand):
    command = _train(program, files) if subcommand == "train" else _eval(program, files)
    message = _error(*_run(command, **NO_GPU), 1)
    assert "--device cuda but this process sees no CUDA GPU" in message


def test_the_cpu_is_refused_by_name(program, files):
    message = _error(*_run(_train(program, files, device="cpu")), 1)
    assert "--device cpu: the cudnn program runs on a CUDA GPU only" in message


def test_weights_of_another_model_name_the_file_and_the_layer(program, files, tmp_path):
    other = tmp_path / "gray.weights"
    weights_file.save(resnet.resnet50(1, CLASSES).state_dict(), other)  # a 1-channel stem
    for command in (_train(program, files, weights=other), _eval(program, files, weights=other)):
        message = _error(*_run(command, **NO_GPU), 1)  # checked before the GPU is opened
        assert message == f"{other}: conv1.weight has shape (64, 1, 7, 7), the model expects (64, 3, 7, 7)"
    classes = tmp_path / "classes.weights"
    weights_file.save(resnet.resnet50(CHANNELS, 7).state_dict(), classes)
    message = _error(*_run(_train(program, files, weights=classes), **NO_GPU), 1)
    assert message == f"{classes}: fc.weight has shape (7, 2048), the model expects (10, 2048)"


def test_missing_and_extra_tensors_are_listed(program, files, tmp_path):
    state = resnet.resnet50(CHANNELS, CLASSES).state_dict()
    state["extra.weight"] = state.pop("layer3.4.bn2.running_var")
    bad = tmp_path / "renamed.weights"
    weights_file.save(state, bad)
    message = _error(*_run(_train(program, files, weights=bad), **NO_GPU), 1)
    assert message == f"{bad}: does not fit the model: missing [layer3.4.bn2.running_var], unexpected [extra.weight]"


def test_a_corrupt_or_newer_weights_file_is_refused(program, files, tmp_path):
    bad = tmp_path / "bad.weights"
    bad.write_bytes(b"NOPE" + bytes(20))
    assert "not a weights file" in _error(*_run(_train(program, files, weights=bad), **NO_GPU), 1)
    newer = tmp_path / "v2.weights"
    newer.write_bytes(b"ACWT" + struct.pack("<II", 2, 0))
    assert f"{newer}: version 2, this reader knows 1" == _error(*_run(_train(program, files, weights=newer)), 1)


def test_a_prepared_directory_that_does_not_match_names_the_file(program, files, tmp_path):
    root, manifest = files
    images = root / "data" / manifest["splits"]["train"]["images"]
    short = tmp_path / "data"
    short.mkdir()
    for f in (root / "data").iterdir():
        (short / f.name).write_bytes(f.read_bytes()[:-1] if f == images else f.read_bytes())
    message = _error(*_run(_train(program, files, data=short), **NO_GPU), 1)
    assert str(short / images.name) in message and "expected" in message
    missing = tmp_path / "empty"
    missing.mkdir()
    assert "cannot open" in _error(*_run(_train(program, files, data=missing), **NO_GPU), 1)
    bad_order = tmp_path / "order.i32"
    np.arange(5, dtype="<i4").tofile(bad_order)
    message = _error(*_run(_train(program, files, order=bad_order), **NO_GPU), 1)
    assert str(bad_order) in message and "20 bytes, expected 24" in message


@pytest.mark.parametrize("edit, code, expected", [
    (lambda c: c + ["--learning-rate", "0.1"], 2, "unknown flag(s): --learning-rate"),
    (lambda c: c[:c.index("--order")] + c[c.index("--order") + 2:], 2, "missing flag --order"),
    (lambda c: [("fastest" if x == "heuristic" else x) for x in c], 2,
     "--conv-algo: 'fastest' is not one of heuristic, find"),
    (lambda c: c[:c.index("--workspace-limit-mib") + 1] + ["-1"] + c[c.index("--workspace-limit-mib") + 2:], 2,
     "--workspace-limit-mib must be >= 0, got -1"),
    (lambda c: c + ["--cudnn-benchmark", "1"], 2, "unknown flag(s): --cudnn-benchmark"),
])
def test_flag_errors_are_usage_errors_naming_the_flag(program, files, edit, code, expected):
    assert _error(*_run(edit(_train(program, files)), **NO_GPU), code) == expected


def test_eval_flag_errors(program, files):
    assert _error(*_run(_eval(program, files, batch=5), **NO_GPU), 2) == "--batch-size 5 must be in 1..--count (3)"
    command = _eval(program, files)
    command[command.index("--model") + 1] = "aoti"
    assert _error(*_run(command, **NO_GPU), 2) == "--model: 'aoti' is not one of cudnn, cudnn-graphs"
