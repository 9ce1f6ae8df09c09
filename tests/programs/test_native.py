"""The launcher of the C++ programs (programs/native.py), without building them: configure command, records,
failures, and how records become training rows on the NVML sampler's timeline."""
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from abstraction_cost.config import TrainingSettings
from abstraction_cost.measure.nvml import NvmlSampler, Sample
from abstraction_cost.programs import native


def _fake_program(tmp_path: Path, body: str) -> list[str]:
    """A stand-in for ac_libtorch: a Python script that writes records and fails as told."""
    script = tmp_path / "fake_program.py"
    script.write_text("import json, os, signal, sys, time\n" + textwrap.dedent(body))
    return [sys.executable, str(script)]


def test_launch_reads_records_in_order_and_keeps_stray_output_out_of_them(tmp_path):
    command = _fake_program(tmp_path, """
        print(json.dumps({"kind": "start", "monotonic_s": time.monotonic()}), flush=True)
        print("a library talking on stdout", flush=True)
        print(json.dumps([1, 2]), flush=True)
        print(json.dumps({"kind": "phase", "epoch": 0, "phase": "train"}), flush=True)
        print("warning on stderr", file=sys.stderr)
    """)
    seen = []
    result = native.launch(command, on_record=seen.append)
    assert result.returncode == 0 and result.failure() is None
    assert [r["kind"] for r in result.records] == ["start", "phase"] and seen == result.records
    assert result.stderr_tail == ["warning on stderr"]


def test_an_error_record_gives_status_and_the_programs_message(tmp_path):
    command = _fake_program(tmp_path, """
        print(json.dumps({"kind": "error", "status": "oom", "message": "CUDA out of memory. Tried 2 GiB"}))
        sys.exit(3)
    """)
    assert native.launch(command).failure() == ("oom", "CUDA out of memory. Tried 2 GiB")


def test_a_crash_names_the_signal_and_the_last_stderr_line(tmp_path):
    command = _fake_program(tmp_path, """
        print("about to fail in cudnnConvolutionForward", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    """)
    status, message = native.launch(command).failure()
    assert status == "error"
    assert "SIGSEGV" in message and "cudnnConvolutionForward" in message


def test_a_nonzero_exit_without_a_record_names_the_exit_code(tmp_path):
    command = _fake_program(tmp_path, "sys.exit(7)\n")
    status, message = native.launch(command).failure()
    assert status == "error" and "exited with code 7" in message and "no output on stderr" in message


def test_a_missing_program_is_an_error_not_an_exception(tmp_path):
    result = native.launch([tmp_path / "nowhere" / "ac_libtorch", "train"])
    status, message = result.failure()
    assert status == "error" and "cannot start" in message


def _samples(times):
    """NVML samples taken at these monotonic times, memory rising by 10 MiB each."""
    return [Sample(t, 1000.0 + 10 * i, 50.0, 1500.0, 60.0, 200.0) for i, t in enumerate(times)]


class _Run:
    def __init__(self, sampler):
        self.sampler = sampler


def _record(phase, epoch, start, end, **extra):
    return {"kind": "phase", "epoch": epoch, "phase": phase, "loss": 2.0, "accuracy": 0.25, "samples": 8,
            "time_s": 0.5, "time_per_sample_ms": 62.5, "wall_s": end - start, "alloc_peak_mib": 12.5,
            "start_monotonic_s": start, "end_monotonic_s": end, **extra}


def test_training_rows_attribute_nvml_samples_by_the_programs_timestamps():
    sampler = NvmlSampler(None)
    sampler.samples = _samples([10.5, 11.5, 12.5, 20.5])  # three in train-0, none in eval-0
    result = native.Result(["ac_libtorch"], 0, [{"kind": "start"}, _record("train", 0, 10.0, 13.0),
                                                _record("eval", 0, 13.0, 14.0)])
    rows = native.training_rows(_Run(sampler), result)
    assert [(r["epoch"], r["phase"], r["status"]) for r in rows] == [(0, "train", "ok"), (0, "eval", "ok")]
    assert rows[0]["nvml_samples"] == 3 and rows[0]["mem_used_mib_max"] == 1020.0
    assert rows[1]["nvml_samples"] == 0 and rows[1]["mem_used_mib_max"] is None
    assert rows[0]["alloc_peak_mib"] == 12.5 and rows[0]["time_per_sample_ms"] == 62.5


def test_a_crash_after_some_phases_keeps_them_and_adds_an_error_row():
    result = native.Result(["ac_libtorch"], -11, [_record("train", 0, 1.0, 2.0)], ["segfault in kernel"])
    rows = native.training_rows(_Run(NvmlSampler(None)), result)
    assert [r["status"] for r in rows] == ["ok", "error"]
    assert rows[1]["epoch"] is None and "SIGSEGV" in rows[1]["message"]


def test_program_timestamps_share_pythons_monotonic_clock(tmp_path):
    # time.monotonic() is CLOCK_MONOTONIC on Linux; the C++ programs read CLOCK_MONOTONIC directly (timer.h).
    command = _fake_program(tmp_path, """
        print(json.dumps({"kind": "start", "monotonic_s": time.clock_gettime(time.CLOCK_MONOTONIC)}), flush=True)
    """)
    before = time.monotonic()
    record = native.launch(command).records[0]
    assert before <= record["monotonic_s"] <= time.monotonic()


def _manifest():
    return {"channels": 3, "height": 32, "width": 32, "class_names": [str(i) for i in range(10)],
            "mean": [0.5, 0.25, 0.125], "std": [0.2, 0.3, 0.4],
            "splits": {"train": {"count": 12, "images": "train-images.u8", "labels": "train-labels.i64"},
                       "test": {"count": 4, "images": "test-images.u8", "labels": "test-labels.i64"}}}


def _flags(command):
    return dict(zip(command[2::2], command[3::2]))


def test_train_command_passes_everything_the_program_needs_from_manifest_and_config(smoke_config):
    settings = TrainingSettings(epochs=2, batch_size=4, eval_batch_size=3, lr=0.01, momentum=0.9, weight_decay=1e-4)
    command = native.train_command(Path("/bin/ac"), "/d", _manifest(), "/w.weights", "/o.i32", settings,
                                   smoke_config, torch.device("cpu"), save_weights="/out.weights")
    assert command[:2] == ["/bin/ac", "train"]
    flags = _flags(command)
    assert flags["--train-images"] == "/d/train-images.u8" and flags["--test-count"] == "4"
    assert flags["--mean"] == "0.5,0.25,0.125" and flags["--classes"] == "10"
    assert float(flags["--weight-decay"]) == 1e-4 and flags["--eval-batch-size"] == "3"
    assert flags["--device"] == "cpu" and flags["--tf32"] == "0" and flags["--cudnn-benchmark"] == "0"
    assert flags["--save-weights"] == "/out.weights"


def test_mean_and_std_reach_the_program_without_rounding():
    mean = [0.1234567890123456789, 1 / 3, 2 / 7]
    flags = _flags(["prog", "sub", *native.shape_flags({**_manifest(), "mean": mean})])
    assert [float(x) for x in flags["--mean"].split(",")] == mean


def test_eval_command_for_each_model_kind(smoke_config):
    m = _manifest()
    lib = _flags(native.eval_command(Path("/ac"), "libtorch", "/in", m, 2, 1, 3, smoke_config, torch.device("cpu"),
                                     logits_out="/l.f32", weights="/w", classes=10))
    assert lib["--model"] == "libtorch" and lib["--weights"] == "/w" and lib["--classes"] == "10"
    assert lib["--images"] == "/in/test-images.u8" and lib["--count"] == "4" and lib["--logits-out"] == "/l.f32"
    ts = _flags(native.eval_command(Path("/ac"), "torchscript", "/in", m, 2, 1, 3, smoke_config,
                                    torch.device("cpu"), module="/m.pt"))
    assert ts["--module"] == "/m.pt" and "--weights" not in ts


def test_configure_command_hints_only_what_is_missing(tmp_path, monkeypatch):
    toolkit = tmp_path / "cuda"
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "bin" / "nvcc").write_text("")
    monkeypatch.setenv("CUDA_HOME", str(toolkit))
    command = native.cmake_configure_command(tmp_path / "src", tmp_path / "build")
    assert f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}" in command
    if torch.version.cuda:
        assert f"-DCUDA_TOOLKIT_ROOT_DIR={toolkit}" in command
        nvrtc = [c for c in command if c.startswith("-DCUDA_nvrtc_LIBRARY=")]
        assert len(nvrtc) == (1 if native._find_nvrtc() else 0)  # this toolkit has no libnvrtc: the wheel's
        (toolkit / "lib64").mkdir()
        (toolkit / "lib64" / "libnvrtc.so.13").write_text("")
        command = native.cmake_configure_command(tmp_path / "src", tmp_path / "build")
        assert not [c for c in command if c.startswith("-DCUDA_nvrtc_LIBRARY=")]


def test_an_existing_build_dir_keeps_its_generator(tmp_path):
    build = tmp_path / "build"
    build.mkdir()
    (build / "CMakeCache.txt").write_text("")
    command = native.cmake_configure_command(tmp_path / "src", build)
    assert command[command.index("-G") + 1] == "Unix Makefiles"
    (build / "build.ninja").write_text("")
    command = native.cmake_configure_command(tmp_path / "src", build)
    assert command[command.index("-G") + 1] == "Ninja"


def test_a_compile_error_fails_the_build_with_the_compilers_message(tmp_path, caplog):
    src = tmp_path / "native"
    (src / "libtorch").mkdir(parents=True)
    (src / "libtorch" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(ac_libtorch LANGUAGES CXX)\n"
        "add_executable(ac_libtorch main.cpp)\n")
    (src / "libtorch" / "main.cpp").write_text("int main() { return undeclared_thing; }\n")
    with pytest.raises(native.BuildError) as err, caplog.at_level("INFO"):
        native.build("libtorch", jobs=1, source_dir=src, build_dir=tmp_path / "build")
    assert "undeclared_thing" in str(err.value) and "build failed" in str(err.value)
    assert "undeclared_thing" in caplog.text  # the whole compiler output is in the log


def test_sources_cover_the_program_and_common_but_not_the_build_dir():
    files = {p.relative_to(native.SOURCE_DIR).as_posix() for p in native.sources("libtorch")}
    assert {"libtorch/CMakeLists.txt", "libtorch/train.cpp", "common/weights_file.h", "common/timer.h"} <= files
    assert not any(f.startswith("build/") for f in files)


LAUNCHER_CONTEXT_PROBE = """
import json, os, sys, pynvml, torch
from abstraction_cost.measure import device as devices
from abstraction_cost.measure.run import measured_run
config = {"device": "cuda", "seed": 0, "backend_flags": {"tf32": False, "cudnn_benchmark": False},
          "measure": {"nvml_interval_ms": 50, "warmup": 0, "repeats": 1}}
with measured_run(config, rule="probe", job={}, env_path=sys.argv[1]) as run:
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByUUID("GPU-" + devices.cuda_uuid(run.device).removeprefix("GPU-"))
    pids = [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]
print(json.dumps({"pid": os.getpid(), "pids": pids}))
"""


@pytest.mark.gpu
def test_the_launcher_holds_no_cuda_context_of_its_own(tmp_path):
    # NVML's memory figure is device-wide: a CUDA context in the launching process (hundreds of MiB) would be
    # charged to the C++ backends. measured_run only queries the device, so it must not create one. (Run in a
    # fresh process: this test process may hold a context from other GPU tests, and the GPU slot their measured
    # runs locked, so the probe locks in a folder of its own.)
    env = {**os.environ, "ABSTRACTION_COST_GPU_LOCK_DIR": str(tmp_path / "locks")}
    proc = subprocess.run([sys.executable, "-c", LAUNCHER_CONTEXT_PROBE, str(tmp_path / "env.parquet")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["pid"] not in seen["pids"], "measured_run created a CUDA context in the launcher"


def test_runtime_env_puts_the_cuda_wheels_on_the_library_path(monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/existing")
    env = native.runtime_env()
    parts = env["LD_LIBRARY_PATH"].split(":")
    assert parts[-1] == "/opt/existing"
    assert all(Path(p).is_dir() for p in parts[:-1])


def test_two_builds_of_one_tree_run_one_after_the_other(tmp_path, monkeypatch):
    """Two processes (here threads with descriptors of their own) building one program's tree: CMake's steps never
    overlap, where two configures in one tree break each other (pytest workers, jobs that build on first use)."""
    import threading
    spans, lock = [], threading.Lock()

    def fake_cmake(command, logger, tail):
        started = time.monotonic()
        time.sleep(0.2)
        if command[1] == "--build":
            exe = native.program_path("libtorch", tmp_path)
            exe.parent.mkdir(parents=True, exist_ok=True)
            exe.touch()
        with lock:
            spans.append((started, time.monotonic()))
        return 0

    monkeypatch.setattr(native, "_run_logged", fake_cmake)
    builds = [threading.Thread(target=native.build, args=("libtorch",), kwargs={"build_dir": tmp_path})
              for _ in range(2)]
    for t in builds:
        t.start()
    for t in builds:
        t.join()
    spans.sort()
    assert len(spans) == 4   # configure and build, twice
    # each build's two steps together, the second build's after the first's
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
