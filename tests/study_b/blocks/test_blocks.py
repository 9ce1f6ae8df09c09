"""Study B building blocks: cases, not_run/error rows, ResNet-50 enumeration and attribution, speedup tables,
config schema and report charts. Compiles with Inductor C++ only at tiny sizes (the smoke run covers the rest)."""
import copy
from pathlib import Path

import polars as pl
import pytest
import torch

from abstraction_cost import config as config_module, tables
from abstraction_cost.report import study_b_blocks as report
from abstraction_cost.study_b.blocks import convolutions as cv
from abstraction_cost.study_b.blocks.cases import TimingSettings, time_case
from abstraction_cost.study_b.blocks.experiments import run_timing
from abstraction_cost.study_b.blocks.speedups import Bootstrap, resnet_conv_speedups, speedup_rows, speedups
from tests.fixtures.repository import REPO

ROOT = REPO
CPU = torch.device("cpu")
SETTINGS = TimingSettings(warmup=1, rounds=2, repeats_per_round=2, flush_l2=False, rotating_inputs=2,
                          rotate_max_mib=1, device_setting="auto")
BOOT = Bootstrap(resamples=200, confidence=0.95, seed=0)


@pytest.fixture(scope="module")
def smoke():
    return config_module.load(ROOT / "config" / "smoke.yaml")


# ---- config ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["smoke", "gpu-smoke", "config", "paper"])
def test_every_config_has_a_valid_blocks_section(name):
    cfg = config_module.load(ROOT / "config" / f"{name}.yaml")
    assert set(cfg["study_b"]["blocks"]) >= {"matmul", "conv_ablation", "resnet50_convs", "conv_blocks"}


def test_bad_blocks_key_names_the_dotted_key(smoke):
    bad = copy.deepcopy(smoke)
    bad["study_b"]["blocks"]["conv_ablation"]["kernel"] = [1]
    bad["study_b"]["blocks"]["matmul"]["modes"] = ["fast"]
    with pytest.raises(config_module.ConfigError) as err:
        config_module.validate(bad)
    assert "study_b.blocks.conv_ablation" in str(err.value) and "'kernel'" in str(err.value)
    assert "study_b.blocks.matmul.modes.0" in str(err.value)


def test_paper_config_has_the_studys_scale():
    blocks = config_module.load(ROOT / "config" / "paper.yaml")["study_b"]["blocks"]
    assert max(blocks["matmul"]["sizes"]["gpu"]) == 17500
    assert blocks["conv_ablation"]["padding_sets"] == {"text": [1, 2, 3], "code": [0, 1, 2]}


# ---- cases ----------------------------------------------------------------------------------------------------
def _mm_case(n=8, aliased_first=False):
    def build(device):
        sets = [(torch.randn(n, n, device=device), torch.randn(n, n, device=device)) for _ in range(2)]
        if aliased_first:   # the same tensor twice: dynamo guards on aliasing, so the second set recompiles
            sets[0] = (sets[0][0], sets[0][0])
        return torch.mm, sets
    return build


def test_time_case_cpu_pair_rows_are_interleaved_and_valid():
    rows = time_case(_mm_case(), "cpu", "default", CPU, SETTINGS, {"n": 8, "dtype": "float32"}, "mm")
    df = tables.frame("study_b_matmul", [{"run_id": "r", **r} for r in rows])
    assert df["status"].unique().to_list() == ["ok"]
    assert sorted(df["configuration"].unique().to_list()) == ["cpp", "interp"]
    assert df.height == 2 * SETTINGS.rounds * SETTINGS.repeats_per_round
    cpp = df.filter(pl.col("configuration") == "cpp")
    assert cpp["frames_compiled"][0] >= 1 and cpp["recompiles"][0] == 0
    assert (df["rotating_inputs"] == 2).all() and (df["time_ms"] > 0).all()


def test_time_case_spreads_its_rounds_over_min_seconds(smoke):
    config = copy.deepcopy(smoke)
    config["study_b"]["blocks"]["timing"]["min_seconds"] = 0.3
    spread = TimingSettings.from_config(config)
    assert spread.min_seconds == 0.3 and TimingSettings.from_config(smoke).min_seconds == 0
    rows = time_case(_mm_case(), "cpu", "default", CPU, spread, {"n": 8, "dtype": "float32"}, "mm")
    interp = [r for r in rows if r["configuration"] == "interp"]
    assert len(interp) > 10 * spread.rounds * spread.repeats_per_round     # µs calls: many rounds in 0.3 s
    assert max(r["round"] for r in interp) + 1 == len(interp) // spread.repeats_per_round


@pytest.mark.parametrize("name", ["gpu-smoke", "config", "paper"])
def test_the_gpu_configs_spread_a_cases_rounds_over_a_second(name):
    assert config_module.load(ROOT / "config" / f"{name}.yaml")["study_b"]["blocks"]["timing"]["min_seconds"] >= 1


def test_a_negative_min_seconds_names_its_key(smoke):
    bad = copy.deepcopy(smoke)
    bad["study_b"]["blocks"]["timing"]["min_seconds"] = -1
    with pytest.raises(config_module.ConfigError, match=r"study_b\.blocks\.timing\.min_seconds"):
        config_module.validate(bad)


def test_recompile_between_input_sets_is_counted_in_warmup_not_timed():
    rows = time_case(_mm_case(aliased_first=True), "cpu", "default", CPU, SETTINGS, {"n": 8, "dtype": "float32"}, "mm")
    cpp = [r for r in rows if r["configuration"] == "cpp"]
    assert {r["status"] for r in rows} == {"ok"} and cpp[0]["recompiles"] == 1


def test_time_case_not_run_without_calling_the_builder():
    def never(device):
        raise AssertionError("built a case that does not run")
    rows = time_case(never, "cpu", "reduce-overhead", CPU, SETTINGS, {"n": 8}, "mm")
    assert [r["status"] for r in rows] == ["not_run", "not_run"]
    assert "'default' row" in rows[0]["message"]
    rows = time_case(never, "gpu", "default", CPU, SETTINGS, {"n": 8}, "mm", not_run="no GPU here")
    assert {(r["configuration"], r["status"], r["message"]) for r in rows} == {
        ("cuda", "not_run", "no GPU here"), ("triton", "not_run", "no GPU here")}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only machine")
def test_gpu_pair_is_not_run_on_a_cpu_machine():
    rows = time_case(_mm_case(), "gpu", "default", CPU, SETTINGS, {"n": 8}, "mm")
    assert {r["status"] for r in rows} == {"not_run"} and "torch sees none" in rows[0]["message"]


@pytest.mark.parametrize("exc, status", [(RuntimeError("boom"), "error"), (torch.OutOfMemoryError("oom"), "oom")])
def test_failed_case_is_a_row(exc, status):
    def build(device):
        raise exc
    rows = time_case(build, "cpu", "default", CPU, SETTINGS, {"n": 8}, "mm")
    assert [r["status"] for r in rows] == [status, status]
    assert type(exc).__name__ in rows[0]["message"] and rows[0]["time_ms"] is None


def test_input_rotation_is_capped_by_size():
    assert SETTINGS.input_sets(2**20) == 2
    assert SETTINGS.input_sets(2**20 + 1) == 1


def test_require_gpu_records_everything_as_not_run(smoke):
    cfg = copy.deepcopy(smoke)
    rows = run_timing("matmul", cfg, "cpu", "default", "r1", require_gpu=True, cuda_available=False)
    assert rows and {r["status"] for r in rows} == {"not_run"}
    assert "study_b.blocks.require_gpu" in rows[0]["message"] and {r["run_id"] for r in rows} == {"r1"}
    tables.frame("study_b_matmul", rows)


# ---- ResNet-50 convolutions -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def layers():
    return cv.resnet50_layers(1, 64)


def test_resnet50_enumeration(layers):
    assert len(layers) == 53
    distinct = cv.distinct_convolutions(layers)
    assert len(distinct) == 23
    assert sum(len(names) for _, _, names in distinct) == 53
    c00 = distinct[0][1]
    assert (distinct[0][0], c00.layer, c00.kernel, c00.stride, c00.padding, c00.input_size) == ("c00", "conv1", 7, 2, 3, 64)
    assert layers[1].input_size == 16          # after the stem's stride-2 conv and max-pool


def test_profiler_shapes_identify_the_distinct_convolution(layers):
    # attribution by (input, weight) shape is exact up to layers of the same distinct convolution
    by_shape = {}
    for layer in layers:
        by_shape.setdefault(str(layer.shapes), set()).add(layer.signature)
    assert all(len(s) == 1 for s in by_shape.values())


def test_attribute_tolerates_reordering_and_reports_gaps(layers):
    events = [(*layer.shapes, float(i)) for i, layer in enumerate(layers)]
    events[1], events[2] = events[2], events[1]
    times = cv.attribute(events, layers)
    assert all(times[layer.layer] == float(i) for i, layer in enumerate(layers))   # each its own op
    assert "52 aten::convolution ops" in cv.attribute(events[:-1], layers)
    bad = list(events)
    bad[0] = ([1, 3, 9, 9], [64, 3, 7, 7], 0.0)
    assert "matches no remaining layer" in cv.attribute(bad, layers)


def test_profile_in_model_eager_pair_on_cpu(smoke):
    cfg = copy.deepcopy(smoke)
    cfg["study_b"]["blocks"]["resnet50_convs"].update(resolution={"cpu": 32, "gpu": 32}, profile_iterations=1)
    rows = cv.profile_in_model(cfg, "cpu", "default", CPU, SETTINGS, not_run=None)
    df = tables.frame("study_b_resnet50_in_model", [{"run_id": "r", **r} for r in rows])
    assert df.height == 2 * 53
    assert df["status"].unique().to_list() == ["ok"], df["message"].unique().to_list()
    assert (df["time_ms"] > 0).all() and df["time_source"].unique().to_list() == ["cpu_op"]


# ---- speedup tables -------------------------------------------------------------------------------------------
def _timings(eager_ms, compiled_ms, status="ok", message=None, n=64):
    rows = []
    for cfg, compiled, times in (("interp", False, eager_ms), ("cpp", True, compiled_ms)):
        for i, t in enumerate(times):
            rows.append({"run_id": "r", "n": n, "dtype": "float32", "pair": "cpu", "configuration": cfg,
                         "compiled": compiled, "mode": "default", "device": "cpu", "status": status,
                         "message": message, "round": i, "repeat": 0, "time_ms": t, "first_call_ms": 9.0,
                         "frames_compiled": 1, "graphs": 1, "graph_breaks": 0, "recompiles": 0, "cache_hits": 0,
                         "cache_misses": 1, "warmup": 1, "flush_l2": False, "rotating_inputs": 1})
    return tables.frame("study_b_matmul", rows)


def test_speedup_rows_ratio_and_status():
    df = pl.concat([_timings([2.0, 2.2, 2.1, 1.9], [1.0, 1.1, 0.9, 1.0]),
                    _timings([None], [None], status="not_run", message="no GPU", n=128)])
    rows = speedups("matmul", df, BOOT)
    ok, nr = rows
    assert ok["status"] == "ok" and ok["speedup"] == pytest.approx(2.05 / 1.0)
    assert ok["speedup_low"] <= ok["speedup"] <= ok["speedup_high"] and ok["speedup_includes_one"] is False
    assert ok["compiled_first_call_ms"] == 9.0 and ok["run_id"] == "r"
    assert (nr["status"], nr["message"], nr["speedup"]) == ("not_run", "no GPU", None)
    tables.frame("study_b_matmul_speedups", rows)


def test_speedup_names_the_failing_side():
    df = _timings([1.0, 1.0], [1.0, 1.0])
    df = df.with_columns(pl.when(pl.col("compiled")).then(pl.lit("error")).otherwise(pl.col("status")).alias("status"),
                         pl.when(pl.col("compiled")).then(pl.lit("Recompiled: x")).otherwise(None).alias("message"))
    (row,) = speedup_rows(df, ["n", "dtype"], BOOT)
    assert (row["status"], row["message"]) == ("error", "compiled: Recompiled: x")


def _conv_rows(table, conv_id, eager, compiled, extra):
    keys = {"conv_id": conv_id, "in_channels": 64, "out_channels": 64, "kernel": 3, "stride": 1, "padding": 1,
            "input_size": 56, "batch": 1}
    rows = []
    for cfg, is_compiled, times in (("interp", False, eager), ("cpp", True, compiled)):
        for t in times:
            rows.append({"run_id": f"{table}-run", **keys, "pair": "cpu", "configuration": cfg,
                         "compiled": is_compiled, "mode": "default", "device": "cpu", "status": "ok",
                         "message": None, "time_ms": t, **extra(cfg)})
    return rows


def test_resnet_join_puts_isolated_beside_in_model():
    iso_extra = lambda cfg: {"occurrences": 3, "layers": "a,b,c", "round": 0, "repeat": 0, "first_call_ms": 1.0,  # noqa: E731
                             "frames_compiled": 1, "graphs": 1, "graph_breaks": 0, "recompiles": 0, "cache_hits": 0,
                             "cache_misses": 1, "warmup": 1, "flush_l2": False, "rotating_inputs": 1}
    iso = tables.frame("study_b_resnet50_convs", _conv_rows("iso", "c02", [1.0, 1.0], [2.0, 2.0], iso_extra))
    model_rows = []
    for conv_id in ("c02", "c03"):
        for layer in ("a", "b"):
            model_rows += [{**r, "layer": f"{conv_id}{layer}", "iteration": 0, "time_source": "cpu_op",
                            "model_first_call_ms": 5.0, "frames_compiled": 1, "graph_breaks": 0}
                           for r in _conv_rows("model", conv_id, [1.0], [0.5], lambda cfg: {})]
    model = tables.frame("study_b_resnet50_in_model", model_rows)
    rows = resnet_conv_speedups(iso, model, BOOT)
    df = tables.frame("study_b_resnet50_conv_speedups", rows)
    c02 = df.filter(pl.col("conv_id") == "c02").row(0, named=True)
    assert c02["isolated_speedup"] == pytest.approx(0.5) and c02["in_model_speedup"] == pytest.approx(2.0)
    assert c02["occurrences"] == 2 and c02["run_id"] == "model-run" and c02["isolated_run_id"] == "iso-run"
    c03 = df.filter(pl.col("conv_id") == "c03").row(0, named=True)
    assert c03["isolated_status"] == "not_run" and "resnet50_convs.limit" in c03["isolated_message"]


# ---- report ---------------------------------------------------------------------------------------------------
def test_report_charts_and_headline():
    df = _timings([2.0, 2.2, 2.1, 1.9], [1.0, 1.1, 0.9, 1.0], n=4096)
    sp = tables.frame("study_b_matmul_speedups", speedups("matmul", df, BOOT))
    assert report.matmul_figure(sp).to_dict()["facet"]["column"]["field"] == "mode"
    assert report.matmul_time_figure(sp).to_dict()
    assert report.matmul_figure(sp.head(0)) is None
    head = report.headline(sp, sp.head(0), sp.head(0))
    assert head["result"].to_list() == ["matmul n=4096"]
    assert "run_id" not in report.display(sp).columns


# ---- GPU (run on the GPU machine) -----------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_gpu_pair_times_with_l2_flush(mode):
    dev = torch.device("cuda")
    settings = TimingSettings(**{**SETTINGS.__dict__, "flush_l2": True})
    rows = time_case(_mm_case(256), "gpu", mode, dev, settings, {"n": 256, "dtype": "float32"}, "mm")
    df = tables.frame("study_b_matmul", [{"run_id": "r", **r} for r in rows])
    assert df["status"].unique().to_list() == ["ok"], df["message"].unique().to_list()
    assert df["flush_l2"].all() and sorted(df["configuration"].unique()) == ["cuda", "triton"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_pair_spreads_its_flushed_rounds_over_min_seconds():
    settings = TimingSettings(**{**SETTINGS.__dict__, "flush_l2": True, "min_seconds": 0.5})
    rows = time_case(_mm_case(256), "gpu", "default", torch.device("cuda"), settings,
                     {"n": 256, "dtype": "float32"}, "mm")
    df = tables.frame("study_b_matmul", [{"run_id": "r", **r} for r in rows])
    assert df["status"].unique().to_list() == ["ok"], df["message"].unique().to_list()
    # flushed, synchronised calls of microseconds: far more rounds than the 2 configured in half a second
    per_side = df.filter(pl.col("configuration") == "cuda").height
    assert per_side > 20 * settings.rounds * settings.repeats_per_round and df["flush_l2"].all()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("mode, compiled_status", [("default", {"ok"}), ("reduce-overhead", {"missing"})])
def test_gpu_in_model_profile(smoke, mode, compiled_status):
    cfg = copy.deepcopy(smoke)
    cfg["study_b"]["blocks"]["resnet50_convs"].update(resolution={"cpu": 64, "gpu": 64}, profile_iterations=2)
    settings = TimingSettings(**{**SETTINGS.__dict__, "warmup": 3})   # CUDA graphs replay after warm-up
    rows = cv.profile_in_model(cfg, "gpu", mode, torch.device("cuda"), settings)
    df = tables.frame("study_b_resnet50_in_model", [{"run_id": "r", **r} for r in rows])
    eager = df.filter(~pl.col("compiled"))
    assert eager["status"].unique().to_list() == ["ok"] and (eager["time_ms"] > 0).all()
    assert eager["time_source"].unique().to_list() == ["device_kernels"]
    assert set(df.filter(pl.col("compiled"))["status"].unique()) == compiled_status


def _case_on_a_timing_slot(monkeypatch, pair, device):
    """One case timed as a job pinned to a GPU timing slot would time it (every core a candidate, so that two
    suffice): how many rounds probed the CPUs, and where this thread ends."""
    import os

    from abstraction_cost.measure import affinity
    cores = frozenset(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two CPUs")
    monkeypatch.setattr(affinity, "_pinned", "timing slot 0")
    monkeypatch.setattr(affinity, "_turn_probes", [])
    monkeypatch.setattr(affinity.Turns, "candidates", property(lambda self: sorted(self.cores)))
    rows = time_case(_mm_case(64), pair, "default", device, SETTINGS, {"n": 64, "dtype": "float32"}, "mm")
    assert {r["status"] for r in rows} == {"ok"}, {r["message"] for r in rows}
    assert os.sched_getaffinity(0) == cores   # back on the job's cores after the case
    return len(affinity._turn_probes)


def test_a_case_on_a_timing_slot_probes_the_slots_cpus_before_each_round(monkeypatch):
    """The turn pick of Study B's blocks: the job's own thread, which times, goes to the fastest CPU before each
    round (measure/affinity.py), so a case's rounds do not all meet one CPU's slow state."""
    assert _case_on_a_timing_slot(monkeypatch, "cpu", CPU) == SETTINGS.rounds


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_gpu_case_on_a_timing_slot_probes_the_slots_cpus_before_each_round(monkeypatch):
    assert _case_on_a_timing_slot(monkeypatch, "gpu", torch.device("cuda")) == SETTINGS.rounds


# ---- NumPy beside PyTorch (App. Fig. 1) -----------------------------------------------------------------------
def test_the_cpu_matmul_times_numpy_in_the_same_rounds_on_the_same_inputs():
    from abstraction_cost.study_b.blocks import matmul
    rows = time_case(_mm_case(16), "cpu", "default", CPU, SETTINGS, {"n": 16, "dtype": "float32"}, "mm",
                     extras=matmul.extras("cpu"))
    df = tables.frame("study_b_matmul", [{"run_id": "r", **r} for r in rows])
    numpy_rows = df.filter(pl.col("configuration") == "numpy")
    assert set(numpy_rows["status"]) == {"ok"} and not numpy_rows["compiled"].any()
    assert numpy_rows.height == df.filter(pl.col("configuration") == "interp").height
    assert sorted(numpy_rows["round"].unique()) == list(range(SETTINGS.rounds))
    assert matmul.extras("gpu") == []


def test_numpy_whose_output_differs_is_wrong_output_and_untimed():
    from abstraction_cost.study_b.configurations import CONFIGURATIONS
    wrong = lambda a, b: torch.mm(a, b) + 1  # noqa: E731
    rows = time_case(_mm_case(16), "cpu", "default", CPU, SETTINGS, {"n": 16, "dtype": "float32"}, "mm",
                     extras=[(CONFIGURATIONS["numpy"], wrong)])
    assert {r["status"] for r in rows} == {"wrong_output"} and {r["time_ms"] for r in rows} == {None}
    assert "(numpy)" in rows[0]["message"] and len(rows) == 3


def test_numpy_rows_give_their_own_columns_and_leave_the_compiled_speedup_alone():
    df = _timings([2.0, 2.2, 2.1, 1.9], [1.0, 1.1, 0.9, 1.0])
    numpy_rows = df.filter(pl.col("configuration") == "interp").with_columns(
        pl.lit("numpy").alias("configuration"), (pl.col("time_ms") * 4).alias("time_ms"))
    (row,) = speedups("matmul", pl.concat([df, numpy_rows]), BOOT)
    assert row["speedup"] == pytest.approx(2.05 / 1.0)  # eager is interp's rows alone
    assert row["numpy_median_ms"] == pytest.approx(4 * 2.05) and row["numpy_speedup"] == pytest.approx(0.25)
    sp = tables.frame("study_b_matmul_speedups", [row])
    lines = report.matmul_time_figure(sp).to_dict()
    values = next(iter(lines["datasets"].values()))
    assert {v["configuration"] for v in values} == {"interp", "cpp", "numpy"}
    (gpu,) = speedups("matmul", df.with_columns(pl.lit("gpu").alias("pair")), BOOT)
    assert gpu["numpy_median_ms"] is None
