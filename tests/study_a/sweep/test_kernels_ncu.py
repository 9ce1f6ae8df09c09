"""The sweep's kernel table for the C++ programs: Nsight Compute (programs/ncu.py) over the program's own sweep of
the kernel-point cell (study_a/sweep/kernels.native_profile).

Any machine: the top kernels of ncu's per-kernel summary (tests/fixtures/ncu_summary.csv; reading it is
tests/programs/test_ncu.py's); the report's ReLU rows found among ncu's names; the command line for every C++
implementation (ncu's flags, then the program's sweep flags for one cell); not_run without ncu; an ncu failure
is an error row with ncu's message; and the whole path on the CPU with a fake ncu that runs the real program.
GPU: libtorch and cudnn under the real ncu, exactly the timed calls profiled (ResNet-50's 49 ReLUs per call).
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
import torch

from abstraction_cost import tables
from abstraction_cost.measure import numerics as nx
from abstraction_cost.models import init, resnet, weights_file
from abstraction_cost.programs import native, ncu
from abstraction_cost.study_a import cudnn, transfer
from abstraction_cost.study_a.sweep import kernels as sweep_kernels, native_walk
from abstraction_cost.study_a.sweep.cells import SweepSettings
from tests.fixtures.repository import REPO

FIXTURE = REPO / "tests/fixtures/ncu_summary.csv"
CPP = ("torchscript-cpp", "libtorch", "aoti", "cudnn", "cudnn-graphs")
CHANNELS, CLASSES = 3, 10
CONFIG = {"backend_flags": {"tf32": False, "cudnn_benchmark": False},
          "study_a": {"cudnn": {"algo": "heuristic", "workspace_limit_mib": 1024}}}
RESNET50_RELUS = 49  # stem 1 + 16 bottlenecks × 3


def _settings(batch: int = 2, resolution: int = 16, warmup: int = 2, top: int = 5) -> SweepSettings:
    return SweepSettings(batches=(1, 2), resolutions=(8, 16), warmup=warmup, repeats=10,
                         transfers=("float32-pageable",), implementations=CPP, compile_modes=(), pool=2,
                         kernel_batch=batch, kernel_resolution=resolution, kernel_top=top, require_gpu=False)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Sweep inputs as rule sweep_inputs writes them (2 images at 8, 16 and 64 px), init weights, an aoti
    package's meta, a TorchScript module path."""
    root = tmp_path_factory.mktemp("ncu")
    images = np.random.default_rng(0).integers(0, 256, size=(2, CHANNELS, 40, 40), dtype=np.uint8)
    inputs = root / "inputs"
    inputs.mkdir()
    resolutions = [8, 16, 64]
    for r in resolutions:
        transfer.resize(images, r).tofile(inputs / f"res{r}.u8")
    (inputs / transfer.MANIFEST).write_text(
        f'{{"channels": {CHANNELS}, "pool": 2, "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25], '
        f'"resolutions": {resolutions}}}')
    weights = root / "init.weights"
    weights_file.save(init.initialise(resnet.resnet50(CHANNELS, CLASSES), "kaiming-normal-fan-out", 0).state_dict(),
                      weights)
    package = root / "aoti"
    package.mkdir()
    (package / "meta.json").write_text('{"status": "ok"}')
    return SimpleNamespace(inputs=str(inputs), weights=str(weights), module=str(root / "model.pt"),
                           package=str(package), root=root)


def _inputs(files, program) -> SimpleNamespace:
    return SimpleNamespace(inputs=files.inputs, weights=files.weights, module=files.module, package=files.package,
                           program=str(program))


def _fake_ncu(directory: Path, body: str) -> Path:
    """An executable `ncu` in `directory` that answers --version and otherwise runs `body` (sh)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "ncu"
    path.write_text("#!/bin/sh\n"
                    'if [ "$1" = "--version" ]; then\n'
                    "  echo 'NVIDIA (R) Nsight Compute Command Line Profiler'\n"
                    "  echo 'Version 2099.1.0.0 (build 1) (public-release)'\n"
                    "  exit 0\n"
                    "fi\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def only_on_path(monkeypatch, tmp_path):
    """PATH is one empty directory (returned) and ncu's fallback does not exist: ncu is what the test puts there."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(ncu, "FALLBACK", tmp_path / "no-cuda" / "ncu")
    return bin_dir


# ------------------------------------------------------------------------------------------- the summary
def test_ncu_rows_are_per_call_ranked_by_total_time():
    groups = ncu.parse_summary(FIXTURE.read_text())
    rows = sweep_kernels.kernels_from_ncu(groups, top=3, forwards=2, message="m")
    # the top 3, then every ReLU kernel below them with its own rank (the study's finding compares ReLU launches)
    assert [r["rank"] for r in rows[:3]] == [1, 2, 3]
    below = rows[3:]
    assert below and all("clamp" in r["kernel"] and r["rank"] > 3 for r in below)
    assert [r["rank"] for r in below] == sorted(r["rank"] for r in below)
    first = rows[0]
    assert first["kernel"].startswith("sm80_xmma_fprop_implicit_gemm_tf32f32") and first["grid"] == "(8,2,8)"
    assert first["block"] == "(128,1,1)" and first["calls"] == 5  # 10 invocations over 2 forwards
    assert first["total_us"] == pytest.approx(146.816 / 2) and first["mean_us"] == pytest.approx(14.6816)
    assert first["share"] == pytest.approx(146.816 / 2895.67976)
    assert [r["total_us"] for r in rows] == sorted((r["total_us"] for r in rows), reverse=True)
    assert {r["status"] for r in rows} == {"ok"} and {r["message"] for r in rows} == {"m"}


def test_report_finds_relu_among_ncu_kernel_names():
    """The report's ReLU rows (beside the study's) include ncu's names: eager's and LibTorch's ReLU is ATen's
    clamp kernel (launch_clamp_scalar), ac_cudnn's its relu_kernel and add_relu_kernel."""
    from abstraction_cost.study_a.sweep import summary as sweep_summary
    from abstraction_cost.report import study_a_sweep as ss  # here: altair, which the GPU tests need not bring
    rows = sweep_kernels.kernels_from_ncu(ncu.parse_summary(FIXTURE.read_text()), top=100, forwards=2, message=None)
    rows.append({**rows[0], "kernel": "add_relu_kernel(float *, const float *, long)", "rank": 101})
    defaults = dict.fromkeys(tables.schema("sweep_kernels"))
    measured = [{**defaults, **r, "run_id": "r", "implementation": "libtorch", "numerics": "fp32",
                 "source": "ncu 2025.3.0.0"} for r in rows]
    kernels = tables.frame("sweep_kernels", measured + sweep_summary.study_kernel_rows())
    relu = ss.relu_rows(kernels.filter(pl.col("source") != "study"))
    assert relu.height == 7 and sorted(relu["calls"].to_list()) == [4, 5, 5, 5, 11, 11, 13]
    assert "libtorch launches its 7 configurations" in ss.kernel_finding(kernels)


# ------------------------------------------------------------------------------------------ command line
@pytest.mark.parametrize("implementation", CPP)
def test_command_is_ncu_then_the_programs_sweep_of_one_cell(files, only_on_path, tmp_path, implementation):
    args = tmp_path / "args.txt"
    _fake_ncu(only_on_path, f'printf "%s\\n" "$@" > {args}\nexit 3\n')
    settings = _settings(batch=2, resolution=15, warmup=4)  # 15: the grid's nearest resolution is 16
    config = {**CONFIG, "backend_flags": {"tf32": True, "cudnn_benchmark": False}}
    program = Path("/opt/prog") / ("ac_cudnn" if implementation in cudnn.IMPLEMENTATIONS else "ac_libtorch")
    source, rows = sweep_kernels.native_profile(implementation, "tf32", _inputs(files, program), settings, config,
                                                torch.device("cuda"), CLASSES, 16)
    command = args.read_text().splitlines()
    assert command[:len(ncu.FLAGS)] == list(ncu.FLAGS)
    assert "--launch-skip" not in command  # the program's profiler range marks the timed calls
    program_args = command[len(ncu.FLAGS):]
    assert program_args[:4] == [str(program), "sweep", "--model", native_walk.NATIVE_MODELS[implementation]]
    flag = lambda name: program_args[program_args.index(name) + 1]  # noqa: E731
    assert (flag("--batches"), flag("--resolutions"), flag("--warmup"), flag("--repeats")) == \
        ("2", "16", "4", str(sweep_kernels.PROFILED_CALLS))
    assert (flag("--transfers"), flag("--device"), flag("--tf32"), flag("--start-cell")) == \
        ("float32-pageable", "cuda", "1", "0")
    if implementation in cudnn.IMPLEMENTATIONS:
        assert flag("--conv-algo") == "heuristic"
    assert source == "ncu 2099.1.0.0"
    assert rows == [{"status": "error", "message": "ncu exited with code 3: no output on stderr"}]


def test_without_ncu_the_row_is_not_run_with_the_reason(files, only_on_path):
    source, rows = sweep_kernels.native_profile("libtorch", "fp32", _inputs(files, "/opt/ac_libtorch"), _settings(),
                                                CONFIG, torch.device("cuda"), CLASSES, 16)
    assert rows[0]["status"] == "not_run"
    assert "ncu" in rows[0]["message"] and "neither on PATH nor at" in rows[0]["message"]
    assert "ac_libtorch" in rows[0]["message"]


def test_ncu_at_the_cuda_toolkits_place_is_found_when_not_on_path(only_on_path, tmp_path, monkeypatch):
    fallback = _fake_ncu(tmp_path / "cuda" / "bin", "exit 0\n")
    monkeypatch.setattr(ncu, "FALLBACK", fallback)
    assert ncu.find() == fallback and ncu.version(fallback) == "2099.1.0.0"


def test_bf16_autocast_is_not_run_for_the_programs(files, only_on_path):
    _fake_ncu(only_on_path, "exit 0\n")
    _, rows = sweep_kernels.native_profile("cudnn", "bf16-autocast", _inputs(files, "/opt/ac_cudnn"), _settings(),
                                           CONFIG, torch.device("cuda"), CLASSES, 16)
    assert rows == [{"status": "not_run", "message": nx.NO_CPP_AUTOCAST}]


def test_ncu_failure_is_an_error_row_with_ncus_message(files, only_on_path):
    _fake_ncu(only_on_path, "echo '==PROF== Connected to process 7 (/opt/ac_libtorch)'\n"
                            "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
                            "Performance Counters on the target device 0.'\n"
                            "echo 'some library noise' >&2\n"
                            "exit 1\n")
    source, rows = sweep_kernels.native_profile("libtorch", "fp32", _inputs(files, "/opt/ac_libtorch"), _settings(),
                                                CONFIG, torch.device("cuda"), CLASSES, 16)
    assert len(rows) == 1 and rows[0]["status"] == "error"
    assert rows[0]["message"].startswith("ncu exited with code 1: ==ERROR== ERR_NVGPUCTRPERM")


def test_a_summary_ncu_cannot_read_is_an_error_row(files, only_on_path):
    _fake_ncu(only_on_path, """echo '{"kind":"cell","cell":0,"status":"ok"}'\n"""
                            """echo '{"kind":"sweep_done","cells":1}'\n"""
                            "echo '==WARNING== No kernels were profiled.'\n")
    _, rows = sweep_kernels.native_profile("libtorch", "fp32", _inputs(files, "/opt/ac_libtorch"), _settings(),
                                           CONFIG, torch.device("cuda"), CLASSES, 16)
    assert rows[0]["status"] == "error" and "no per-kernel summary" in rows[0]["message"]
    assert "No kernels were profiled" in rows[0]["message"]


def test_the_cells_oom_under_ncu_is_the_rows_status(files, only_on_path):
    _fake_ncu(only_on_path, """echo '{"kind":"sweep_start","cells":1}'\n"""
                            """echo '{"kind":"cell","cell":0,"status":"oom","message":"CUDA out of memory"}'\n"""
                            """echo '{"kind":"sweep_done","cells":1}'\n""")
    _, rows = sweep_kernels.native_profile("libtorch", "fp32", _inputs(files, "/opt/ac_libtorch"), _settings(),
                                           CONFIG, torch.device("cuda"), CLASSES, 16)
    assert rows == [{"status": "oom", "message": "under ncu, the kernel point's cell: CUDA out of memory"}]


def test_whole_path_on_the_cpu_with_a_fake_ncu_running_the_real_program(files, only_on_path, program):
    """ac_libtorch's sweep of the one cell really runs (on the CPU) under a fake ncu that then prints the real
    summary: the program's records and ncu's CSV share stdout, and are told apart."""
    flags = len(ncu.FLAGS)
    _fake_ncu(only_on_path, f'shift {flags}\n"$@" || exit $?\n/bin/cat {FIXTURE}\n')
    source, rows = sweep_kernels.native_profile("libtorch", "fp32", _inputs(files, program), _settings(top=4),
                                                CONFIG, torch.device("cpu"), CLASSES, 16)
    assert source == "ncu 2099.1.0.0"
    assert [r["rank"] for r in rows[:4]] == [1, 2, 3, 4] and {r["status"] for r in rows} == {"ok"}
    assert rows[0]["grid"] == "(8,2,8)" and rows[0]["total_us"] == pytest.approx(146.816 / 3)
    assert "3 timed calls" in rows[0]["message"] and "after 2 warm-up calls, not profiled" in rows[0]["message"]


# ------------------------------------------------------------------------------------------------- GPU
def _is_convolution(name: str) -> bool:
    name = name.lower()
    return any(word in name for word in ("conv", "fprop", "implicit_gemm", "wgrad", "dgrad"))


def _gpu_rows(files, program_name: str, implementation: str) -> tuple[str, list[dict]]:
    assert ncu.find() is not None, f"no ncu on PATH nor at {ncu.FALLBACK}"
    program = native.ensure_built(program_name)
    settings = _settings(batch=8, resolution=64, warmup=2, top=1000)  # top 1000: every kernel
    return sweep_kernels.native_profile(implementation, "fp32", _inputs(files, program), settings, CONFIG,
                                        torch.device("cuda"), CLASSES, 64)


@pytest.mark.gpu
@pytest.mark.parametrize("program_name,implementation", [("libtorch", "libtorch"), ("cudnn", "cudnn")])
def test_real_ncu_profiles_exactly_the_timed_calls(files, program_name, implementation):
    source, rows = _gpu_rows(files, program_name, implementation)
    relu = [r for r in rows if "relu" in (r["kernel"] or "").lower() or "clamp" in (r["kernel"] or "").lower()]
    if os.environ.get("AC_NCU_REPORT"):  # the top rows and the ReLU rows, for the issue
        with open(os.environ["AC_NCU_REPORT"], "a") as report:
            report.writelines(f"{implementation}\t{source}\t{r['status']}\t{r['rank']}\t{r['calls']}\t"
                              f"{r['total_us']}\t{r['mean_us']}\t{r['grid']}\t{r['block']}\t"
                              f"{(r['kernel'] or r['message'])[:100]}\n" for r in rows[:15] + relu)
    assert source.startswith("ncu ") and source != "ncu unknown version"
    assert {r["status"] for r in rows} == {"ok"}, rows[:1]
    assert any(_is_convolution(r["kernel"]) for r in rows)
    assert all(r["total_us"] > 0 and r["mean_us"] > 0 and r["calls"] >= 1 for r in rows)
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    # per timed call, ResNet-50's 49 ReLUs: warm-up or start-up kernels in the profiled range would add calls
    assert sum(r["calls"] for r in relu) == RESNET50_RELUS, [(r["kernel"][:80], r["calls"]) for r in relu]


@pytest.mark.gpu
def test_kernel_job_of_a_cpp_program_writes_ncu_rows_the_report_reads(files, tmp_path):
    """Rule sweep_kernels_job for libtorch in tf32 on the GPU: rows from ncu, labelled, and the report's ReLU
    rows found among them."""
    from abstraction_cost import config as config_module
    from abstraction_cost.report import study_a_sweep as ss
    config = config_module.load(REPO / "config/smoke.yaml")
    config["device"] = "cuda"
    config["study_a"]["sweep"].update(batches=[8], resolutions=[8, 16, 64], warmup=1, numerics=["tf32"],
                                      kernels={"batch_size": 8, "resolution": 64, "top": 1000})
    inputs = _inputs(files, native.ensure_built("libtorch"))
    out = SimpleNamespace(table=str(tmp_path / "k.parquet"), env=str(tmp_path / "k.env.parquet"))
    with nx.applied("fp32"):  # the job sets its TF32 flags for the whole process: restored after the test
        sweep_kernels.run(SimpleNamespace(config=config, input=inputs, output=out, rule="sweep_kernels_job",
                                          wildcards=SimpleNamespace(implementation="libtorch", numerics="tf32")))
    df = tables.read("sweep_kernels", out.table)
    assert df["status"].unique().to_list() == ["ok"], df.select("status", "message").head(1).to_dicts()
    assert df["source"].str.starts_with("ncu ").all() and df["numerics"].unique().to_list() == ["tf32"]
    assert (df["batch_size"].unique().to_list(), df["resolution"].unique().to_list()) == ([8], [64])
    assert ss.relu_rows(df).height > 0 and "libtorch (tf32)" in ss.kernel_finding(df)
