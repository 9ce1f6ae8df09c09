"""Study A's backend comparison under the interleaved protocol (study_a/comparison/interleaved.py), on the CPU: one job
per numerics runs eager (a Python worker) and libtorch (ac_libtorch sweep --serve) in turns over invocations, the
rows carry invocation and turn, the comparison resamples invocations and paired turns, each implementation's
profiled pass is its backend_profile row (null device columns on the CPU, saying why), bad protocol keys are refused
naming the key. Its faults (a killed job, a dying worker) are in tests/faults/test_eval_workers.py."""
import copy
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

from abstraction_cost import config as config_module
from abstraction_cost import tables
from abstraction_cost.data import offline, prepared
from abstraction_cost.data.specs import spec
from abstraction_cost.models import init, resnet, weights_file
from abstraction_cost.study_a.comparison import compare as comparison, job as eval_backend
from abstraction_cost.study_a.sweep.store import cells_dir

IMPLEMENTATIONS = ["eager", "libtorch"]


def _job(tmp_path, smoke_config, program, numerics="fp32", implementations=IMPLEMENTATIONS, **protocol):
    """Rule eval_backend's job as Snakemake hands it to the script: one numerics, every implementation."""
    config = copy.deepcopy(smoke_config)
    config["measure"].update(warmup=1, repeats=2)
    config["study_a"]["backends"].update(batch_size=2, resolution=32, dataset="synthetic-cifar10",
                                         implementations=list(implementations))
    config["study_a"]["backends"]["protocol"] = {"mode": "interleaved", "invocations": 2, "max_invocations": 2,
                                                 "blocks": 3, "block_ms": 1, "warmup_max": 3, "profile_calls": 2,
                                                 **protocol}
    config_module.validate(config)
    ds = spec("synthetic-cifar10", config)
    shape = type(ds)(ds.name, ds.channels, 32, 32, ds.class_names)
    if not (tmp_path / "input").exists():
        prepared.write(tmp_path / "input", "backend-eval-input", offline.synthetic(shape, 2, 2),
                       list(ds.class_names), [])
        model = init.initialise(resnet.resnet50(3, 10), "kaiming-normal-fan-out", 0)
        weights_file.save(model.state_dict(), tmp_path / "w.weights")
    inputs = SimpleNamespace(input=str(tmp_path / "input"), weights=str(tmp_path / "w.weights"),
                             program_libtorch=str(program))
    folder = tmp_path / "eval" / numerics
    folder.mkdir(parents=True, exist_ok=True)   # Snakemake makes its outputs' folders
    out = SimpleNamespace(tables=[str(folder / f"{i}.rows.parquet") for i in implementations],
                          logits=[str(folder / f"{i}.logits.f32") for i in implementations],
                          env=str(folder.parent / f"{numerics}.env.parquet"),
                          profile=str(folder.parent / f"{numerics}.profile.parquet"))
    return SimpleNamespace(config=config, input=inputs, output=out, rule="eval_backend",
                           params=SimpleNamespace(implementations=list(implementations)),
                           wildcards=SimpleNamespace(numerics=numerics))


def _rows(job) -> dict[str, pl.DataFrame]:
    return {i: tables.read("backend_eval", t) for i, t in zip(job.params.implementations, job.output.tables)}


def test_the_interleaved_job_measures_every_implementation_in_turns_over_invocations(tmp_path, smoke_config, program):
    job = _job(tmp_path, smoke_config, program)
    eval_backend.run_job(job)
    rows = _rows(job)
    env = tables.read("environment", job.output.env)
    assert env.height == 1 and env["job"][0] == "numerics=fp32"
    for impl, r in rows.items():
        assert (r["status"] == "ok").all(), r.select("status", "message")
        assert r["run_id"].unique().to_list() == env["run_id"].to_list()   # one run for the whole comparison
        assert sorted(r["invocation"].unique()) == [0, 1]                  # two sets of fresh processes
        assert sorted(r["turn"].unique()) == [0, 1, 2]                     # three turns each
        per_invocation = r.group_by("invocation").len()["len"].to_list()
        assert min(per_invocation) >= 2                                    # at least measure.repeats calls each
        assert (r["protocol"] == "interleaved").all() and (r["transfer"] == "uint8-pinned").all()
        assert r["warmup_calls"].min() >= 1 and (r["time_per_sample_ms"] * 2 - r["time_ms"]).abs().max() < 1e-9
        logits = comparison.read_logits(job.output.logits[job.params.implementations.index(impl)], 2)
        assert logits is not None and logits.shape == (2, 10)
    evals = pl.concat(rows.values())
    out = comparison.compare(evals, dict(zip(job.params.implementations, job.output.logits)), 1e-4, seed=0)
    by = {r["implementation"]: r for r in tables.frame("backend_comparison", out).iter_rows(named=True)}
    assert by["eager"]["speedup_vs_eager"] == 1.0 and by["eager"]["invocations"] == 2
    lib = by["libtorch"]
    assert lib["status"] == "ok" and lib["parity_ok"], lib   # the C++ worker's logits are eager's network's
    assert lib["protocol"] == "interleaved" and lib["invocations"] == 2 and lib["paired_turns"] == 6
    assert lib["time_per_sample_ms_low"] <= lib["time_per_sample_ms"] <= lib["time_per_sample_ms_high"]
    assert lib["speedup_vs_eager_low"] <= lib["speedup_vs_eager"] <= lib["speedup_vs_eager_high"]
    assert not cells_dir(job.output.env).exists()   # the job finished: nothing left to resume
    profile = tables.read("backend_profile", job.output.profile)
    assert profile["implementation"].to_list() == IMPLEMENTATIONS
    for p in profile.iter_rows(named=True):   # the pass ran in each worker after its turns; no device to profile
        assert p["status"] == "ok" and p["profiled_calls"] == 2, p
        assert (p["batch_size"], p["resolution"], p["transfer"]) == (2, 32, "uint8-pinned")
        assert p["numerics"] == "fp32" and p["run_id"] == env["run_id"][0]
        assert p["host_issue_ms"] > 0 and p["wall_ms"] > 0
        assert p["device_ms"] is None and p["device_message"], p


def test_without_a_profiled_pass_each_implementation_says_which_key_turned_it_off(tmp_path, smoke_config, program):
    job = _job(tmp_path, smoke_config, program, invocations=1, max_invocations=1, blocks=1, profile_calls=0)
    eval_backend.run_job(job)
    assert all((r["status"] == "ok").all() for r in _rows(job).values())
    profile = tables.read("backend_profile", job.output.profile)
    assert profile["implementation"].to_list() == IMPLEMENTATIONS and (profile["status"] == "not_run").all()
    assert all("study_a.backends.protocol.profile_calls: 0" in m for m in profile["message"])


def test_an_invocation_that_failed_beside_ok_ones_leaves_the_row_ok_saying_so():
    base = {**dict.fromkeys(tables.schema("backend_eval")), "run_id": "r", "backend": "eager", "runtime": "python",
            "device": "cpu", "batch_size": 2, "resolution": 32, "protocol": "interleaved", "warmup_calls": 3,
            "steady": True}
    calls = [{**base, "implementation": impl, "invocation": inv, "turn": turn, "repeat": turn, "status": "ok",
              "time_ms": ms * (1 + 0.01 * turn), "time_per_sample_ms": ms * (1 + 0.01 * turn) / 2}
             for impl, ms in (("eager", 10.0), ("libtorch", 5.0)) for inv in (0, 1, 2) for turn in (0, 1, 2)]
    failed = {**base, "implementation": "libtorch", "invocation": 3, "status": "oom", "message": "out of memory"}
    evals = tables.frame("backend_eval", calls + [failed])
    empty = Path("/dev/null")   # no logits: parity is not the point here
    rows = comparison.compare(evals, {"eager": empty, "libtorch": empty}, 1e-4, seed=0)
    lib = rows[1]
    assert lib["status"] == "ok" and lib["invocations"] == 3 and "invocation 3: oom" in lib["message"]
    assert lib["speedup_vs_eager"] == pytest.approx(2.0) and lib["paired_turns"] == 9
    assert lib["speedup_vs_eager_includes_one"] is False


@pytest.mark.parametrize("key, value, message", [
    ("invocations", 0, "study_a.backends.protocol.invocations"),
    ("block_ms", -1, "study_a.backends.protocol.block_ms"),
    ("precision", "tight", "study_a.backends.protocol.precision"),
    ("mode", "fast", "study_a.backends.protocol.mode"),
    ("profile_calls", -1, "study_a.backends.protocol.profile_calls"),
    ("interleave_max_pixels", 10, "study_a.backends.protocol': unknown key"),
])
def test_bad_protocol_keys_are_refused_naming_the_key(smoke_config, key, value, message):
    config = copy.deepcopy(smoke_config)
    config["study_a"]["backends"]["protocol"] = {key: value}
    with pytest.raises(config_module.ConfigError, match=message):
        config_module.validate(config)


def test_the_serial_protocol_measures_each_implementation_in_its_own_run(tmp_path, smoke_config, program):
    job = _job(tmp_path, smoke_config, program, mode="serial")
    eval_backend.run_job(job)
    rows = _rows(job)
    env = tables.read("environment", job.output.env)
    assert env.height == 2 and sorted(env["job"]) == ["implementation=eager,numerics=fp32",
                                                      "implementation=libtorch,numerics=fp32"]
    for r in rows.values():
        assert (r["status"] == "ok").all() and r.height == 2 and (r["protocol"] == "serial").all()
        assert r["invocation"].null_count() == r.height
    assert not (tmp_path / "eval" / "fp32.kept").exists()


@pytest.mark.gpu
@pytest.mark.parametrize("numerics", ["tf32", "cudnn-benchmark"])   # cudnn-benchmark: each worker loads alone
def test_on_the_gpu_the_interleaved_comparison_times_every_worker_and_checks_its_logits(tmp_path, smoke_config,
                                                                                        program, numerics):
    job = _job(tmp_path, smoke_config, program, numerics=numerics, invocations=2, max_invocations=3, blocks=4,
               block_ms=20)
    job.config["device"] = "cuda"
    job.config["study_a"]["backends"].update(require_gpu=True, batch_size=2, resolution=32)
    eval_backend.run_job(job)
    rows = _rows(job)
    env = tables.read("environment", job.output.env)
    assert env["device"][0] == "cuda" and env["tf32_matmul"][0] is (numerics == "tf32")
    assert env["cudnn_benchmark"][0] is (numerics == "cudnn-benchmark")
    out = comparison.compare(pl.concat(rows.values()), dict(zip(job.params.implementations, job.output.logits)),
                             comparison.parity_tolerance(numerics, 1e-4), seed=0)
    for r in out:
        assert r["status"] == "ok", r
        assert 2 <= r["invocations"] <= 3
        assert r["time_per_sample_ms_low"] <= r["time_per_sample_ms"] <= r["time_per_sample_ms_high"]
    lib = out[1]
    assert lib["parity_ok"] and lib["paired_turns"] >= 8 and lib["steady"] is not None
    profile = {p["implementation"]: p for p in tables.read("backend_profile", job.output.profile).iter_rows(named=True)}
    eager = profile["eager"]   # torch.profiler over CUPTI in the Python worker
    assert eager["status"] == "ok" and eager["device_ms"] > 0 and eager["kernels"] > 0, eager
    assert eager["device_source"] and eager["device_idle_ms"] is not None
    assert profile["libtorch"]["status"] == "ok" and (profile["libtorch"]["device_ms"] or 0) > 0, profile["libtorch"]
