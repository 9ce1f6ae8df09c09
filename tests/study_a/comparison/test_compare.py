"""Study A's backend comparison without the C++ programs: eval jobs' failure rows, the comparison table (medians,
speedups, parity) and its report display; the config section's validation."""
import copy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
import torch

from abstraction_cost import config as config_module
from abstraction_cost import tables
from abstraction_cost.data import offline, prepared
from abstraction_cost.data.specs import spec
from abstraction_cost.measure.nvml import NvmlSampler
from abstraction_cost.models import init, resnet, weights_file
from abstraction_cost.report import study_a_backends
from abstraction_cost.study_a import aoti
from abstraction_cost.study_a.comparison import compare as comparison, job as eval_backend, serial as eval_job
from tests.fixtures.repository import REPO


def test_parity_of_identical_logits_is_exact_and_ok():
    a = np.array([[1.0, -2.0], [3.0, 0.5]], dtype=np.float32)
    p = comparison.parity(a.copy(), a, 1e-4)
    assert p["max_abs_logit_diff"] == 0 and p["parity_ok"] and p["argmax_agreement"] == 1.0


def test_parity_is_relative_to_the_largest_eager_logit():
    base = np.array([[1000.0, -2000.0]], dtype=np.float32)
    off = base + np.array([[0.1, 0.0]], dtype=np.float32)  # 0.1 absolute is 5e-5 of 2000
    p = comparison.parity(off, base, 1e-4)
    assert p["max_abs_logit_diff"] == pytest.approx(0.1, rel=1e-3) and p["parity_ok"]
    assert not comparison.parity(off, base, 1e-5)["parity_ok"]


def test_parity_without_logits_says_why():
    a = np.zeros((2, 3), np.float32)
    assert comparison.parity(None, a, 1e-4)["parity_message"] == "this implementation produced no logits"
    assert "no eager logits" in comparison.parity(a, None, 1e-4)["parity_message"]
    p = comparison.parity(np.zeros((2, 4), np.float32), a, 1e-4)
    assert p["parity_ok"] is None and "shape (2, 4) differs" in p["parity_message"]


def _eval_rows(name, times_ms, status="ok", message=None, batch=2):
    base = {**dict.fromkeys(tables.schema("backend_eval")), "run_id": f"run-{name}", "implementation": name,
            "backend": eval_job.IMPLEMENTATIONS[name].backend, "runtime": eval_job.IMPLEMENTATIONS[name].runtime,
            "method": "m", "device": "cpu", "batch_size": batch, "resolution": 32, "status": status,
            "message": message, "mem_used_mib_max": 900.0, "alloc_peak_mib": 100.0}
    if status != "ok":
        return [base]
    return [{**base, "repeat": i, "time_ms": t, "time_per_sample_ms": t / batch} for i, t in enumerate(times_ms)]


def test_compare_gives_medians_speedups_and_parity_and_keeps_failures(tmp_path):
    rows = (_eval_rows("eager", [10.0, 11.0, 12.0, 10.5]) + _eval_rows("libtorch", [5.0, 5.5, 6.0, 5.2])
            + _eval_rows("aoti", [], status="error", message="compile failed: no C++ compiler")
            + _eval_rows("torchscript-cpp", [9.0, 9.5, 9.2]))
    evals = tables.frame("backend_eval", rows)
    logits = np.arange(8, dtype="<f4").reshape(2, 4)
    paths = {}
    for name, data in (("eager", logits), ("libtorch", logits + 1e-6), ("aoti", None),
                       ("torchscript-cpp", logits[:, ::-1])):
        paths[name] = tmp_path / f"{name}.f32"
        (np.ascontiguousarray(data).tofile(paths[name]) if data is not None else paths[name].write_bytes(b""))
    out = tables.write("backend_comparison", comparison.compare(evals, paths, 1e-4, seed=0),
                       tmp_path / "comparison.parquet")
    by = {r["implementation"]: r for r in out.iter_rows(named=True)}
    assert list(by) == ["eager", "libtorch", "aoti", "torchscript-cpp"]
    assert by["eager"]["speedup_vs_eager"] == 1.0 and by["eager"]["max_abs_logit_diff"] == 0.0
    lib = by["libtorch"]
    assert lib["time_per_sample_ms"] == pytest.approx(np.median([5.0, 5.5, 6.0, 5.2]) / 2)
    assert lib["time_per_sample_ms_low"] <= lib["time_per_sample_ms"] <= lib["time_per_sample_ms_high"]
    expected = np.median([10.0, 11.0, 12.0, 10.5]) / np.median([5.0, 5.5, 6.0, 5.2])
    assert lib["speedup_vs_eager"] == pytest.approx(expected)
    assert lib["speedup_vs_eager_includes_one"] is False and lib["parity_ok"] and lib["repeats"] == 4
    failed = by["aoti"]
    assert failed["status"] == "error" and failed["message"] == "compile failed: no C++ compiler"
    assert failed["time_per_sample_ms"] is None and failed["parity_message"] == "this implementation produced no logits"
    flipped = by["torchscript-cpp"]
    assert flipped["parity_ok"] is False and flipped["argmax_agreement"] == 0.0  # a different network shows
    assert flipped["status"] == "wrong_output" and flipped["speedup_vs_eager"] is None   # never a speedup
    assert "logits differ from eager's" in flipped["message"]
    display = study_a_backends.comparison_display(out)
    assert display["implementation"].to_list() == ["eager", "torchscript-cpp", "libtorch", "aoti"]
    assert display.filter(pl.col("implementation") == "aoti")["status"][0].startswith("error: compile failed")
    assert "DIFFERENT" in display.filter(pl.col("implementation") == "torchscript-cpp")["max |Δlogit| vs eager"][0]
    chart = study_a_backends.time_chart(out)
    # eager and libtorch: the failed aoti and the wrong torchscript-cpp are not drawn
    assert chart is not None and len(chart.to_dict()["datasets"][next(iter(chart.to_dict()["datasets"]))]) == 2
    two = pl.concat([out.with_columns(numerics=pl.lit("tf32")), out.with_columns(numerics=pl.lit("fp32"))])
    assert study_a_backends.time_chart(two).to_dict()["facet"]["row"]["sort"] == ["fp32", "tf32"]  # the study's first


def test_compare_when_nothing_was_run_writes_not_run_rows(tmp_path):
    """The default config on a machine without a GPU: every implementation not_run, no time anywhere."""
    names = ("eager", "libtorch", "aoti")
    evals = tables.frame("backend_eval", [r for n in names for r in _eval_rows(n, [], status="not_run",
                                                                              message="needs a GPU")])
    paths = {}
    for name in names:
        paths[name] = tmp_path / f"{name}.f32"
        paths[name].write_bytes(b"")
    out = tables.write("backend_comparison", comparison.compare(evals, paths, 1e-4, seed=0),
                       tmp_path / "comparison.parquet")
    assert out["status"].to_list() == ["not_run"] * 3 and out["message"].to_list() == ["needs a GPU"] * 3
    assert out["time_per_sample_ms"].null_count() == 3 and out["speedup_vs_eager"].null_count() == 3


def test_report_functions_on_an_empty_table():
    empty = pl.DataFrame(schema=tables.schema("backend_comparison"))
    assert study_a_backends.time_chart(empty) is None
    assert study_a_backends.comparison_display(empty).is_empty() and study_a_backends.setting(empty) is None


class _Run:
    def __init__(self, device):
        self.device = torch.device(device)
        self.sampler = NvmlSampler(None)


def _settings(**kw):
    return eval_job.EvalSettings(**{"dataset": "synthetic-cifar10", "init": "kaiming-normal-fan-out", "seed": 0,
                                    "batch_size": 2, "resolution": 32, "warmup": 0, "repeats": 2,
                                    "require_gpu": False, "logit_tolerance": 1e-4, **kw})


def test_without_a_gpu_require_gpu_gives_one_not_run_row(tmp_path):
    rows = eval_job._measure("libtorch", None, _settings(require_gpu=True), 10, {}, _Run("cpu"), {}, tmp_path / "l")
    assert rows == [{"status": "not_run",
                     "message": "no CUDA GPU on this machine and study_a.backends.require_gpu is true"}]


def test_a_failed_artifact_becomes_the_rows_status(tmp_path):
    meta = aoti.not_run(tmp_path / "aoti", "needs a GPU")
    rows = eval_job._measure("aoti", None, _settings(), 10, {}, _Run("cpu"), meta, tmp_path / "l")
    assert rows == [{"status": "not_run", "message": "needs a GPU"}]
    assert aoti.read_meta(tmp_path / "aoti")["status"] == "not_run"


def test_a_missing_program_becomes_an_error_row(tmp_path, smoke_config):
    inputs = _inputs(tmp_path, smoke_config)
    inputs.program = str(tmp_path / "no" / "ac_libtorch")
    rows = eval_job._measure("libtorch", inputs, _settings(), 10, smoke_config, _Run("cpu"), {}, tmp_path / "l.f32")
    assert rows[0]["status"] == "error" and "cannot start" in rows[0]["message"]


def _inputs(tmp_path, config) -> SimpleNamespace:
    ds = spec("synthetic-cifar10", config)
    shape = type(ds)(ds.name, ds.channels, 32, 32, ds.class_names)
    prepared.write(tmp_path / "input", "backend-eval-input", offline.synthetic(shape, 2, 2), list(ds.class_names), [])
    model = init.initialise(resnet.resnet50(3, 10), "kaiming-normal-fan-out", 0)
    weights_file.save(model.state_dict(), tmp_path / "w.weights")
    return SimpleNamespace(input=str(tmp_path / "input"), weights=str(tmp_path / "w.weights"))


def test_eager_eval_job_writes_rows_environment_and_logits(tmp_path, smoke_config):
    config = copy.deepcopy(smoke_config)
    config["measure"].update(warmup=0, repeats=2)
    config["study_a"]["backends"].update(batch_size=2, resolution=32, dataset="synthetic-cifar10")
    out = SimpleNamespace(table=str(tmp_path / "eager.rows.parquet"), env=str(tmp_path / "eager.env.parquet"),
                          logits=str(tmp_path / "eager.logits.f32"))
    job = SimpleNamespace(config=config, input=_inputs(tmp_path, config), output=out, rule="eval_backend")
    eval_job.run(job, "eager")
    rows = tables.read("backend_eval", out.table)
    assert rows["repeat"].to_list() == [0, 1] and (rows["status"] == "ok").all()
    assert (rows["time_per_sample_ms"] * 2 == rows["time_ms"]).all() and rows["method"][0] == "module"
    env = tables.read("environment", out.env)
    assert env["run_id"].to_list() == rows["run_id"].unique().to_list()
    assert np.fromfile(out.logits, "<f4").shape == (2 * 10,)


def test_the_config_section_requires_eager_as_baseline(smoke_config):
    config = copy.deepcopy(smoke_config)
    config["study_a"]["backends"]["implementations"] = ["libtorch", "aoti"]
    with pytest.raises(config_module.ConfigError, match="study_a.backends.implementations"):
        config_module.validate(config)
    config["study_a"]["backends"]["implementations"] = ["eager", "onnx"]
    with pytest.raises(config_module.ConfigError, match="'onnx' is not one of"):
        config_module.validate(config)


def test_libtorch_is_a_training_backend(smoke_config):
    config = copy.deepcopy(smoke_config)
    config["study_a"]["training"]["backends"] = ["eager", "libtorch"]
    config_module.validate(config)


@pytest.mark.parametrize("name", ["smoke", "gpu-smoke", "config", "paper"])
def test_every_shipped_config_has_the_section(name):
    config = config_module.load(REPO / "config" / f"{name}.yaml")
    b = config["study_a"]["backends"]
    assert "eager" in b["implementations"] and "libtorch" in config["study_a"]["training"]["backends"]
    if name != "smoke":
        assert (b["batch_size"], b["resolution"], b["require_gpu"]) == (32, 224, True)


def test_numerics_are_labelled_rows_each_compared_with_eager_in_its_own_numerics(tmp_path, smoke_config):
    config = copy.deepcopy(smoke_config)
    config["measure"].update(warmup=0, repeats=2)
    config["study_a"]["backends"].update(batch_size=2, resolution=32, dataset="synthetic-cifar10")
    inputs = _inputs(tmp_path, config)
    paths, tables_out = {}, []
    for numerics in ("fp32", "tf32", "bf16-autocast"):
        out = SimpleNamespace(table=str(tmp_path / f"{numerics}.rows.parquet"),
                              env=str(tmp_path / f"{numerics}.env.parquet"),
                              logits=str(tmp_path / f"{numerics}.logits.f32"))
        eval_job.run(SimpleNamespace(config=config, input=inputs, output=out, rule="eval_backend"), "eager", numerics)
        env = tables.read("environment", out.env).row(0, named=True)
        assert env["tf32_cudnn"] is (numerics == "tf32") and env["tf32_matmul"] is (numerics == "tf32")
        tables_out.append(tables.read("backend_eval", out.table))
        paths[numerics] = {"eager": out.logits}
    evals = pl.concat(tables_out)
    assert set(evals["numerics"]) == {"fp32", "tf32", "bf16-autocast"} and (evals["status"] == "ok").all()
    rows = comparison.compare_numerics(evals, paths, 1e-4, seed=0)
    assert [(r["numerics"], r["parity_tolerance"]) for r in rows] == [("fp32", 1e-4), ("tf32", 2e-2),
                                                                      ("bf16-autocast", 1e-1)]
    # bfloat16 logits really are bfloat16's: they differ from fp32's beyond fp32's tolerance
    fp32, bf16 = (np.fromfile(paths[n]["eager"], "<f4") for n in ("fp32", "bf16-autocast"))
    assert not comparison.parity(bf16[None], fp32[None], 1e-4)["parity_ok"]
    display = study_a_backends.comparison_display(tables.frame("backend_comparison", rows))
    assert display["numerics"].to_list() == ["fp32", "tf32", "bf16-autocast"]


def test_bf16_autocast_is_not_run_in_the_cpp_programs(tmp_path):
    rows = eval_job._measure("libtorch", None, _settings(), 10, {}, _Run("cpu"), {}, tmp_path / "l", "bf16-autocast")
    assert rows[0]["status"] == "not_run" and "autocast" in rows[0]["message"]


def _numerics_job(tmp_path, smoke_config, implementations=("eager",), numerics="fp32"):
    """Rule eval_backend's job as Snakemake hands it to the script, under the serial protocol: one numerics, every
    implementation in turn (the interleaved protocol's job: tests/study_a/comparison/test_interleaved.py)."""
    config = copy.deepcopy(smoke_config)
    config["measure"].update(warmup=0, repeats=2)
    config["study_a"]["backends"].update(batch_size=2, resolution=32, dataset="synthetic-cifar10",
                                         implementations=list(implementations), protocol={"mode": "serial"})
    folder = tmp_path / "eval" / numerics
    folder.mkdir(parents=True)   # Snakemake makes its outputs' folders
    out = SimpleNamespace(tables=[str(folder / f"{i}.rows.parquet") for i in implementations],
                          logits=[str(folder / f"{i}.logits.f32") for i in implementations],
                          env=str(folder.parent / f"{numerics}.env.parquet"))
    inputs = _inputs(tmp_path, config)
    inputs.program_libtorch = str(tmp_path / "no" / "ac_libtorch")   # libtorch, where asked for, cannot start
    return SimpleNamespace(config=config, input=inputs, output=out, rule="eval_backend",
                           params=SimpleNamespace(implementations=list(implementations)),
                           wildcards=SimpleNamespace(numerics=numerics))


def test_a_serial_job_measures_each_implementation_in_its_own_run_and_a_failed_one_is_only_its_row(
        tmp_path, smoke_config, monkeypatch):
    job = _numerics_job(tmp_path, smoke_config, ("eager", "libtorch"), numerics="tf32")
    eval_backend.run_job(job)
    eager, libtorch = (tables.read("backend_eval", t) for t in job.output.tables)
    envs = tables.read("environment", job.output.env)
    assert eager["status"].to_list() == ["ok", "ok"] and (eager["protocol"] == "serial").all()
    assert libtorch["status"].to_list() == ["error"] and "cannot start" in libtorch["message"][0]
    assert Path(job.output.logits[1]).read_bytes() == b""   # no logits where it failed
    assert np.fromfile(job.output.logits[0], "<f4").shape == (2 * 10,)
    assert envs.height == 2 and envs["run_id"].n_unique() == 2   # one run per implementation, each its env row
    assert sorted(envs["run_id"]) == sorted([eager["run_id"][0], libtorch["run_id"][0]])
    assert envs["tf32_matmul"].to_list() == [True, True]   # the numerics set before each model was built
    assert not (tmp_path / "eval" / "tf32.kept").exists()   # the job finished: nothing left to resume


def test_an_injected_oom_is_the_numerics_row_of_a_serial_job(tmp_path, smoke_config, monkeypatch):
    job = _numerics_job(tmp_path, smoke_config)
    monkeypatch.setenv("AC_FAULT", "eval:oom@fp32")
    eval_backend.run_job(job)
    rows = tables.read("backend_eval", job.output.tables[0])
    assert rows["status"].to_list() == ["oom"] and "AC_FAULT" in rows["message"][0]


class _Killed(BaseException):
    """Stands for the job's SIGKILL inside pytest's process."""


def test_a_killed_serial_job_resumes_without_measuring_its_finished_implementations_again(tmp_path, smoke_config,
                                                                                         monkeypatch):
    job = _numerics_job(tmp_path, smoke_config, ("eager", "libtorch"))
    measured = []
    measure = eval_job.run

    def killing(job, impl, numerics, out):
        measured.append(impl)
        if impl == "libtorch" and measured.count("libtorch") == 1:
            raise _Killed()
        return measure(job, impl, numerics, out)
    monkeypatch.setattr(eval_job, "run", killing)
    with pytest.raises(_Killed):
        eval_backend.run_job(job)
    assert measured == ["eager", "libtorch"]
    kept_run = tables.read("backend_eval", job.output.tables[0])["run_id"][0]
    for path in (*job.output.tables, job.output.env, *job.output.logits):   # Snakemake removes a failed job's outputs
        Path(path).unlink(missing_ok=True)
    eval_backend.run_job(job)
    assert measured == ["eager", "libtorch", "libtorch"]   # the rerun measured only the implementation not finished
    eager = tables.read("backend_eval", job.output.tables[0])
    assert eager["run_id"].unique().to_list() == [kept_run] and (eager["status"] == "ok").all()
    assert kept_run in tables.read("environment", job.output.env)["run_id"].to_list()
    assert np.fromfile(job.output.logits[0], "<f4").shape == (2 * 10,)
    assert not (tmp_path / "eval" / "fp32.kept").exists()


def test_kept_steps_of_another_setting_are_measured_again(tmp_path, smoke_config):
    from abstraction_cost.study_a.comparison import store as eval_store
    job = _numerics_job(tmp_path, smoke_config)
    key = eval_store.job_key(job.config, "fp32", job.input)
    store = eval_store.NumericsStore(tmp_path / "kept", key)
    for path, data in zip((job.output.tables[0], job.output.env, job.output.logits[0]), (b"t", b"e", b"l")):
        Path(path).write_bytes(data)
    store.keep("eager", [job.output.tables[0], job.output.env, job.output.logits[0]])
    restored = [str(tmp_path / n) for n in ("t", "e", "l")]
    assert eval_store.NumericsStore(tmp_path / "kept", key).restore("eager", restored)
    assert [Path(p).read_bytes() for p in restored] == [b"t", b"e", b"l"]
    assert not eval_store.NumericsStore(tmp_path / "kept", key).restore("libtorch", restored)
    other = copy.deepcopy(job.config)
    other["measure"]["repeats"] = 3
    assert eval_store.job_key(other, "fp32", job.input) != key
    assert eval_store.job_key(job.config, "tf32", job.input) != key
    more = copy.deepcopy(job.config)
    more["study_a"]["backends"]["implementations"] = ["eager", "libtorch"]   # turns with another implementation
    assert eval_store.job_key(more, "fp32", job.input) != key
    adding = copy.deepcopy(job.config)
    adding["study_a"]["backends"]["numerics"] = ["fp32", "tf32"]   # another numerics is another job
    assert eval_store.job_key(adding, "fp32", job.input) == key
    assert not eval_store.NumericsStore(tmp_path / "kept", "another-key").restore("eager", restored)
