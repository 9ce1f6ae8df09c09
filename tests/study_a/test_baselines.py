"""The Study A baselines that the registry added: eager-cudagraphs (eager's forward replayed from a CUDA graph),
compiled-static (a dynamic=False build per shape beside the dynamic one) and the numerics cudnn-benchmark. On the
CPU eager-cudagraphs is a not_run row naming the reason, in the sweep and in the backend comparison; on a GPU its
output is eager's."""
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from abstraction_cost import implementations as im
from abstraction_cost.measure.nvml import NvmlSampler
from abstraction_cost.measure.run import Run
from abstraction_cost.models import resnet, weights_file
from abstraction_cost.models import cuda_graphs
from abstraction_cost.study_a.comparison import serial as eval_job
from abstraction_cost.study_a.sweep import cells as sweep_cells, python_model, serial as sweep
from tests.fixtures.repository import REPO

CPU = torch.device("cpu")


def _cpu_run() -> Run:
    return Run(run_id="r", device=CPU, sampler=NvmlSampler(None, 50, "no GPU"))


def test_eager_cudagraphs_on_the_cpu_is_not_run_in_the_backend_comparison(tmp_path):
    settings = eval_job.EvalSettings(dataset="synthetic-cifar10", init="kaiming-normal-fan-out", seed=0, batch_size=2,
                                     resolution=32, warmup=0, repeats=2, require_gpu=False, logit_tolerance=1e-4)
    rows = eval_job._measure("eager-cudagraphs", None, settings, 10, {}, _cpu_run(), {}, tmp_path / "l")
    assert rows == [{"status": "not_run", "message": "CUDA graphs (torch.cuda.graphs) need a CUDA GPU, and this "
                                                     "run's device is cpu"}]


def test_eager_cudagraphs_on_the_cpu_is_a_not_run_row_per_cell():
    settings = sweep_cells.SweepSettings((1, 2), (8,), 0, 1, ("float32-pageable",), ("eager-cudagraphs",), (), 2,
                                         1, 8, 3, False)
    rows = sweep.sweep_rows("eager-cudagraphs", SimpleNamespace(), settings, {}, 10, _cpu_run())
    assert [r["status"] for r in rows] == ["not_run", "not_run"]
    assert "CUDA graphs" in rows[0]["message"] and "cpu" in rows[0]["message"]


def test_a_graph_needs_a_cuda_tensor():
    with pytest.raises(RuntimeError, match="CUDA graphs need a CUDA tensor"):
        cuda_graphs.Graphed(torch.nn.Identity(), torch.zeros(1))


def test_compiled_static_builds_per_shape_whatever_compile_shapes_says(tmp_path):
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 5).state_dict(), weights)
    model = python_model.PythonModel("compiled-static-default", SimpleNamespace(weights=str(weights)), 3, 5, CPU,
                                     compile_shapes="dynamic")
    assert model.compile_shapes == "per-shape" and model.mode == "default" and model.builds
    assert sweep_cells.build_kind("compiled-static-default", "dynamic") == "per-shape"
    assert sweep_cells.kind("compiled-static-max-autotune") == ("compiled", "python")


def test_static_compile_modes_name_the_static_jobs_apart():
    settings = sweep_cells.SweepSettings((1,), (8,), 0, 1, ("float32-pageable",),
                                         ("eager", "compiled", "compiled-static"), ("default", "reduce-overhead"), 2,
                                         1, 8, 3, False, static_compile_modes=("default",))
    assert settings.jobs() == ["eager", "compiled-default", "compiled-reduce-overhead", "compiled-static-default"]
    assert im.split("compiled-static-default") == (im.REGISTRY["compiled-static"], "default")


def test_a_bad_static_compile_mode_is_refused_naming_the_key():
    import yaml
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    s = {**config["study_a"]["sweep"], "static_compile_modes": ["fastest"]}
    with pytest.raises(sweep_cells.SweepConfigError, match="study_a.sweep.static_compile_modes"):
        sweep_cells.check(s)


def test_cudnn_benchmark_is_fp32_with_the_benchmark_flag_in_python_and_in_both_programs():
    from abstraction_cost.programs import native
    from abstraction_cost.study_a import cudnn
    from abstraction_cost.measure import numerics as nx
    base = {"backend_flags": {"tf32": True, "cudnn_benchmark": False},
            "study_a": {"cudnn": {"algo": "heuristic", "workspace_limit_mib": 64}}}
    job = nx.job_config(base, "cudnn-benchmark", "study_a.sweep.numerics")
    assert job["backend_flags"] == {"tf32": False, "cudnn_benchmark": True}
    assert nx.job_config(base, "fp32", "k")["backend_flags"] == {"tf32": False, "cudnn_benchmark": False}
    assert nx.tolerance("cudnn-benchmark") == nx.tolerance("fp32")
    flags = native.common_flags(job, CPU)
    assert flags[flags.index("--cudnn-benchmark") + 1] == "1" and flags[flags.index("--tf32") + 1] == "0"
    conv = cudnn.with_conv_flags(["ac_cudnn", "eval", *flags], job)
    assert conv[conv.index("--conv-algo") + 1] == "find" and "--cudnn-benchmark" not in conv
    plain = cudnn.with_conv_flags(["ac_cudnn", "eval", *native.common_flags(base, CPU)], base)
    assert plain[plain.index("--conv-algo") + 1] == "heuristic"
    assert im.REGISTRY["libtorch"].not_run_reason("cudnn-benchmark", "cuda") is None


def test_the_environment_row_records_cudnn_benchmark_for_its_numerics():
    from abstraction_cost.measure import device as devices
    from abstraction_cost.measure import numerics as nx
    saved = (torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.get_float32_matmul_precision())
    try:
        devices.apply_numerics(nx.job_config({"backend_flags": {"tf32": True, "cudnn_benchmark": False}},
                                             "cudnn-benchmark", "k"))
        assert torch.backends.cudnn.benchmark and not torch.backends.cuda.matmul.allow_tf32
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = \
            saved[:3]
        torch.set_float32_matmul_precision(saved[3])


@pytest.mark.gpu
def test_eager_cudagraphs_replays_eagers_output_at_each_shape_and_checks_it(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    device = torch.device("cuda")
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 5).state_dict(), weights)
    model = python_model.PythonModel("eager-cudagraphs", SimpleNamespace(weights=str(weights)), 3, 5, device)
    with torch.no_grad():
        for shape in ((2, 3, 32, 32), (4, 3, 16, 16)):
            x = torch.randn(*shape, device=device)
            assert model.needs_reference(x.shape)
            model.take_reference(lambda: x)
            assert model.build(x) is not None
            model.check(lambda: x)  # raises WrongOutput unless the replay is eager's
            y = torch.randn(*shape, device=device)
            torch.testing.assert_close(model.forward(y), model.module(y), rtol=1e-4, atol=1e-4)


def test_a_cuda_graph_modes_build_marks_a_step_before_each_call_on_the_gpu_only(monkeypatch):
    marks = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    build = lambda x: x + 1  # noqa: E731
    stepped = python_model._stepped(build, "reduce-overhead", torch.device("cuda"))
    assert stepped(torch.ones(1)).item() == 2 and marks == [1]
    assert python_model._stepped(build, "default", torch.device("cuda")) is build
    assert python_model._stepped(build, "max-autotune", CPU) is build


def test_the_study_set_leaves_out_the_baselines_and_the_other_compile_modes():
    assert [j for j in ("eager", "eager-cudagraphs", "libtorch", "compiled-default", "compiled-reduce-overhead",
                        "compiled-static-default", "cudnn-graphs", "nonsense") if im.in_study(j)] == \
        ["eager", "libtorch", "compiled-default", "cudnn-graphs"]


def test_a_baseline_as_fast_as_eager_does_not_turn_the_studys_time_finding():
    """The backend comparison's finding (eager ≥ 5× slower than every other implementation) reads the study's
    implementations: eager-cudagraphs beside it, at eager's speed, is in the table but not in the verdict."""
    import polars as pl
    from abstraction_cost.report import study_a_backends as sab
    rows = [{"status": "ok", "numerics": "fp32", "implementation": name, "speedup_vs_eager": s,
             "speedup_vs_eager_low": s * 0.95, "speedup_vs_eager_high": s * 1.05}
            for name, s in (("eager", 1.0), ("libtorch", 10.0), ("eager-cudagraphs", 1.0))]
    text = sab.time_finding(pl.DataFrame(rows))
    assert "fp32: holds (libtorch" in text and "eager-cudagraphs" not in text
    only_baseline = pl.DataFrame([r for r in rows if r["implementation"] != "libtorch"])
    assert sab.time_finding(only_baseline).startswith("Not measured here")


def test_a_baseline_as_slow_as_eager_does_not_turn_the_sweeps_time_finding():
    import polars as pl
    from abstraction_cost.report import study_a_sweep as ss
    from tests.report.test_study_a_sweep import _sweep, _verdicts
    sweep = _sweep()
    baseline = sweep.filter(pl.col("implementation") == "eager").with_columns(
        pl.lit("eager-cudagraphs").alias("implementation"))
    text = ss.time_finding(pl.concat([sweep, baseline]))
    assert _verdicts(text) == ["holds", "holds"] and "eager-cudagraphs" not in text
