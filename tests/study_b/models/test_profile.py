"""Study B's profiled pass and its decomposition: the vision worker's `profile` command on the CPU (host columns
measured, device columns null with the reason), the conductor asking for it only after every timed turn of the
first invocation (the order of commands a fake worker receives), a crash in the pass leaving the timed rows intact,
the decomposition rows of experiment vision_e2e from fixture tables with fake device times, the config check of
study_b.models.protocol.profile_calls, the report's sentence, and on a GPU a tiny end-to-end step profiled."""
from __future__ import annotations

import copy
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest
import torch

from abstraction_cost import config as config_module
from abstraction_cost import tables
from abstraction_cost.study_b.models import protocol as vision_protocol
from abstraction_cost.study_b.models import vision as vm
from abstraction_cost.derived import decomposition
from abstraction_cost.measure import profiled

from tests.fixtures.repository import REPO as ROOT
from tests.fixtures.spare_cores import cores_by_command, saying_cores, spare_cores  # noqa: F401 (a fixture)


def _config(**models_overrides) -> dict:
    config = copy.deepcopy(config_module.load(ROOT / "config" / "smoke.yaml"))
    config["study_b"]["models"].update({"baselines": ["channels_last", "cuda_graphs"], "modes": ["default"],
                                        **models_overrides})
    config["study_b"]["models"]["protocol"] = dict(invocations=1, max_invocations=1, blocks=2, block_ms=5.0,
                                                   min_calls=2, warmup_max=6, profile_calls=3)
    return config


def _with_id(rows: list[dict]) -> list[dict]:
    return [{**r, "run_id": "r"} for r in rows]


# ------------------------------------------------------------------------------------------------- config
@pytest.mark.parametrize("value", [-1, 1.5, True, "5"])
def test_profile_calls_that_is_not_a_non_negative_integer_is_refused_naming_the_key(value):
    config = _config()
    config["study_b"]["models"]["protocol"]["profile_calls"] = value
    with pytest.raises(config_module.ConfigError, match=r"study_b\.models\.protocol\.profile_calls"):
        config_module.validate(config)
    with pytest.raises(ValueError, match=r"study_b\.models\.protocol\.profile_calls"):
        vision_protocol.Protocol.from_config({"protocol": {"profile_calls": value}})


def test_profile_calls_zero_is_allowed_and_the_default_profiles_a_few_calls():
    config = _config()
    config["study_b"]["models"]["protocol"]["profile_calls"] = 0
    config_module.validate(config)
    assert vision_protocol.Protocol.from_config({"protocol": {"profile_calls": 0}}).profile_calls == 0
    assert vision_protocol.Protocol.from_config({}).profile_calls == vision_protocol.PROTOCOL_DEFAULTS[
        "profile_calls"] == 5


# ------------------------------------------------------------------------------- the conductor, fake workers
# A vision worker speaking vision_worker's protocol: every call takes 1 ms; each command is appended to LOG as
# "<key> <command>"; DIE ("profile") makes it exit 3 when told to profile.
FAKE_WORKER = textwrap.dedent('''
    import json, sys
    key, log, die = sys.argv[1], sys.argv[2], sys.argv[3]
    role = key.partition("@")[0]   # "@<invocation>" where a test tells invocations apart
    variants = ["eager", "eager_channels_last"] if role == "clean" else ["compiled", "dp_blocks", "eager_in_process"]
    def say(record):
        print(json.dumps(record), flush=True)
    say({"kind": "up"})
    for line in sys.stdin:
        op, _, arg = line.strip().partition(" ")
        with open(log, "a") as f:
            f.write(f"{key} {line.strip()}\\n")
        if op == "prepare":
            with open(log, "a") as f:
                f.write(f"{key} ready\\n")
            say({"kind": "ready", "variants": {v: {"status": "ok", "message": None, "call_ms": 1.0,
                                                   "warmup_calls": 3, "steady": True} for v in variants}})
        elif op == "time":
            name, _, n = arg.rpartition(" ")
            say({"kind": "block", "variant": name, "times_ms": [1.0] * int(n)})
        elif op == "profile":
            if die == "profile":
                sys.exit(3)
            n, *names = arg.split()
            say({"kind": "profile", "variants": {v: {"status": "ok", "message": None, "profiled_calls": int(n),
                                                     "host_issue_ms": 0.5, "host_cpu_ms": 0.4, "wall_ms": 1.0,
                                                     "device_source": None, "device_ms": None,
                                                     "device_message": "fake"} for v in names}})
''')


@pytest.fixture
def fake(tmp_path, monkeypatch):
    script = tmp_path / "fake_vision_worker.py"
    script.write_text(FAKE_WORKER)
    log = tmp_path / "commands.log"
    monkeypatch.setattr(vision_protocol, "_command",
                        lambda spec, directory, key: [sys.executable, str(script), key, str(log),
                                                      spec.get("die", "")])

    def run(inv: int = 0, profile_calls: int = 4, die: str = "") -> tuple[list[dict], list[str]]:
        log.unlink(missing_ok=True)
        protocol = vision_protocol.Protocol.from_config(
            {"protocol": {"blocks": 3, "block_ms": 2.0, "min_calls": 3, "profile_calls": profile_calls}})
        specs = {"clean": {}, "compiled:default": {"die": die}}
        records = next(vision_protocol.sessions(specs, protocol, [inv]))
        return records, log.read_text().splitlines()
    return run


def test_the_conductor_asks_for_the_profile_only_after_every_timed_turn_of_the_first_invocation(fake):
    from abstraction_cost.measure import worker_phases
    before = len(worker_phases._seconds)
    records, lines = fake()
    start_s, load_s = worker_phases._seconds[-1]   # its workers' start-up, then their loading: one invocation
    assert len(worker_phases._seconds) == before + 1 and start_s > 0 and load_s >= 0
    profiles = [i for i, line in enumerate(lines) if " profile " in line]
    times = [i for i, line in enumerate(lines) if " time " in line]
    assert len(times) == 3 * 5 and len(profiles) == 2          # 3 turns of 5 variants; one pass per worker
    assert min(profiles) > max(times)                           # no timed call after any profiled pass
    # each worker profiles its ok end-to-end variants (not the selective dp_blocks), all in one command
    assert [lines[i] for i in profiles] == ["clean profile 4 eager eager_channels_last",
                                            "compiled:default profile 4 compiled eager_in_process"]
    by = {(r["worker"], r["variant"]): r for r in records}
    assert by[("clean", "eager")]["profile"]["host_issue_ms"] == 0.5
    assert "profile" not in by[("compiled:default", "dp_blocks")]
    assert all(len(r["blocks"]) == 3 for r in records)

    # later invocations and profile_calls 0 profile nothing
    for records, lines in (fake(inv=1), fake(profile_calls=0)):
        assert not [line for line in lines if " profile " in line]
        assert not any("profile" in r for r in records)


def test_later_invocations_prepare_at_once_and_are_timed_one_after_another(tmp_path, monkeypatch):
    """Invocations 1 and 2 of a protocol of 3: every worker of both is told to prepare before any is timed (their
    start-ups and builds overlap); invocation 1's turns, then its workers' end, all come before invocation 2's
    first turn; one start-up and loading for the pair."""
    from abstraction_cost.measure import worker_phases
    script, log = tmp_path / "fake_vision_worker.py", tmp_path / "commands.log"
    script.write_text(FAKE_WORKER + 'with open(log, "a") as f:\n    f.write(f"{key} end\\n")\n')
    monkeypatch.setattr(vision_protocol, "_command", lambda spec, directory, key: [
        sys.executable, str(script), f"{key}@{spec['invocation']}", str(log), ""])
    protocol = vision_protocol.Protocol.from_config({"protocol": {"blocks": 2, "block_ms": 2.0, "min_calls": 2}})
    assert [protocol.batch(i, first_alone=False) for i in range(5)] == [[0, 1, 2], [1, 2], [2], [3], [4]]
    assert [protocol.batch(i, first_alone=True) for i in range(5)] == [[0], [1, 2], [2], [3], [4]]
    before = len(worker_phases._seconds)
    by_inv = list(vision_protocol.sessions({"clean": {}, "compiled:default": {}}, protocol, [1, 2]))
    assert len(worker_phases._seconds) == before + 1
    assert [{r["invocation"] for r in records} for records in by_inv] == [{1}, {2}]
    assert all(len(r["blocks"]) == 2 for records in by_inv for r in records)
    lines = log.read_text().splitlines()
    where = lambda inv, op: [i for i, line in enumerate(lines) if line.split()[0].endswith(f"@{inv}")
                             and line.split()[1] == op]
    assert len(where(1, "prepare")) == len(where(2, "prepare")) == 2
    assert max(where(1, "prepare") + where(2, "prepare")) < min(where(1, "time"))
    assert max(where(1, "time")) < min(where(1, "end")) and max(where(1, "end")) < min(where(2, "time"))
    assert not where(1, "profile") and not where(2, "profile")   # only invocation 0 has a profiled pass

    # prepare_together off: each invocation alone
    off = vision_protocol.Protocol.from_config({"protocol": {"prepare_together": False}})
    assert [off.batch(i, first_alone=False) for i in range(4)] == [[0], [1], [2], [3]]
    with pytest.raises(ValueError, match=r"study_b\.models\.protocol\.prepare_together"):
        vision_protocol.Protocol.from_config({"protocol": {"prepare_together": 1}})


def test_a_worker_that_times_algorithms_as_it_builds_prepares_alone_after_the_others(tmp_path, monkeypatch):
    """Invocations 1 and 2 together: the workers that time candidate algorithms (here a max-autotune mode's)
    prepare after every other worker of both is ready, one at a time, nothing else preparing meanwhile."""
    script, log = tmp_path / "fake_vision_worker.py", tmp_path / "commands.log"
    script.write_text(FAKE_WORKER)
    monkeypatch.setattr(vision_protocol, "_command", lambda spec, directory, key: [
        sys.executable, str(script), f"{key}@{spec['invocation']}", str(log), ""])
    protocol = vision_protocol.Protocol.from_config({"protocol": {"blocks": 2, "block_ms": 2.0, "min_calls": 2}})
    specs = {"clean": {}, "compiled:default": {}, "compiled:max-autotune": {}}
    config = {"backend_flags": {"cudnn_benchmark": False}}
    alone = vision_protocol.times_algorithms(config, specs)
    assert alone == {"compiled:max-autotune"}
    assert vision_protocol.times_algorithms({"backend_flags": {"cudnn_benchmark": True}}, specs) == set(specs)
    by_inv = list(vision_protocol.sessions(specs, protocol, [1, 2], alone))
    assert all(r["status"] == "ok" and len(r["blocks"]) == 2 for records in by_inv for r in records)
    lines = [line for line in log.read_text().splitlines() if line.split()[1] in ("prepare", "ready")]
    solo = [k for k, line in enumerate(lines) if line.startswith("compiled:max-autotune@")]
    assert len(lines) == 12 and solo == [8, 9, 10, 11]   # the other four workers' prepares and readies first
    assert [lines[k].split()[1] for k in solo] == ["prepare", "ready", "prepare", "ready"]


def test_vision_workers_prepare_on_the_spare_cores_too_and_take_their_turns_on_the_jobs(tmp_path, monkeypatch,
                                                                                         spare_cores):
    """gpus.spread_loads: each worker reads its cores as it answers; its prepare (builds, checks, warm-ups) may use
    the job's and the spare cores, its turns the job's alone."""
    job, spare = spare_cores
    script, log = tmp_path / "fake_vision_worker.py", tmp_path / "commands.log"
    script.write_text(saying_cores(FAKE_WORKER, 'f.write(f"{key} {line.strip()}\\n")')
                      .replace("import json, sys", "import json, os, sys"))
    monkeypatch.setattr(vision_protocol, "_command", lambda spec, directory, key: [
        sys.executable, str(script), f"{key}@{spec['invocation']}", str(log), ""])
    protocol = vision_protocol.Protocol.from_config({"protocol": {"blocks": 2, "block_ms": 2.0, "min_calls": 2,
                                                                  "profile_calls": 0}})
    by_inv = list(vision_protocol.sessions({"clean": {}, "compiled:default": {}}, protocol, [1, 2]))
    assert all(r["status"] == "ok" for records in by_inv for r in records)
    seen = cores_by_command(log.read_text().splitlines())
    assert seen["prepare"] == {str(sorted(job | spare))} and seen["time"] == {str(sorted(job))}


def test_a_worker_dying_in_its_profiled_pass_leaves_its_timed_rows_and_an_error_profile_row(fake):
    records, lines = fake(die="profile")
    compiled = {r["variant"]: r for r in records if r["worker"] == "compiled:default"}
    assert compiled["compiled"]["status"] == "ok" and len(compiled["compiled"]["blocks"]) == 3
    assert compiled["compiled"]["profile"]["status"] == "error"
    assert "exit status 3" in compiled["compiled"]["profile"]["message"]

    config = _config(baselines=["channels_last"])
    setting = vm.settings(config, "cpu")[0]
    out = vision_protocol.rows(config, "squeezenet1_1", "cpu", setting, records, None, 14)
    e2e = tables.frame("vision_e2e", _with_id(out["vision_e2e"]))
    calls = sum(len(b) for b in compiled["compiled"]["blocks"])
    assert set(e2e["status"]) == {"ok"} and e2e.filter(pl.col("variant") == "compiled").height == calls
    prof = tables.frame("vision_profile", _with_id(out["vision_profile"]))
    status = dict(prof.select("variant", "status").iter_rows())
    assert status == {"eager": "ok", "eager_channels_last": "ok", "compiled": "error", "eager_in_process": "error"}
    assert prof.filter(pl.col("variant") == "eager")["host_issue_ms"].to_list() == [0.5]


def test_rows_say_why_a_variant_has_no_profile():
    config = _config(baselines=["channels_last", "cuda_graphs"])
    setting = vm.settings(config, "cpu")[0]
    ok = {"status": "ok", "blocks": [[1.0]], "turns": [0], "invocation": 0}
    records = [{**ok, "worker": "clean", "variant": "eager"},
               {**ok, "worker": "clean", "variant": "eager_channels_last", "status": "wrong_output",
                "message": "differs", "blocks": []},
               {**ok, "worker": "compiled:default", "variant": "compiled"},
               {**ok, "worker": "compiled:default", "variant": "eager_in_process"}]
    prof = {r["variant"]: r for r in vision_protocol.rows(config, "squeezenet1_1", "cpu", setting, records, None,
                                                          14)["vision_profile"]}
    assert prof["eager_channels_last"]["status"] == "not_run" and "wrong_output" in prof["eager_channels_last"][
        "message"]
    assert prof["eager_cuda_graphs"]["status"] == "not_run" and "CUDA device" in prof["eager_cuda_graphs"]["message"]
    assert prof["eager"]["status"] == "not_run" and "kept by an attempt" in prof["eager"]["message"]
    config["study_b"]["models"]["protocol"]["profile_calls"] = 0
    prof = {r["variant"]: r for r in vision_protocol.rows(config, "squeezenet1_1", "cpu", setting, records, None,
                                                          14)["vision_profile"]}
    assert prof["eager"]["message"] == "no profiled pass (study_b.models.protocol.profile_calls: 0)"
    # a job that cannot run here: every profile row not_run with the reason
    none = vision_protocol.not_run_rows(config, "squeezenet1_1", "gpu", setting, "no GPU")["vision_profile"]
    assert {r["status"] for r in none} == {"not_run"} and {r["message"] for r in none} == {"no GPU"}
    tables.frame("vision_profile", _with_id(none))


# ------------------------------------------------------------------------------ the real worker, on the CPU
def test_the_vision_workers_profile_on_the_cpu_measures_the_host_and_says_why_there_is_no_device_time(
        monkeypatch, tmp_path):
    """Both real workers (dynamo's eager backend for the compiled one); the compiled worker dies in its profiled
    pass: its timed rows stand, its profile rows are errors."""
    monkeypatch.setattr(vm, "BACKEND", "eager")
    monkeypatch.setenv("AC_VISION_WORKER_PROFILE_CRASH", "compiled")
    config = _config(baselines=["channels_last", "cuda_graphs"])
    setting = vm.settings(config, "cpu")[0]
    records = vision_protocol.measure(config, "squeezenet1_1", "cpu", setting, None, None, "")
    out = vision_protocol.rows(config, "squeezenet1_1", "cpu", setting, records, None, 14)
    prof = tables.frame("vision_profile", _with_id(out["vision_profile"]))
    by = {r["variant"]: r for r in prof.iter_rows(named=True)}
    for variant in ("eager", "eager_channels_last"):
        r = by[variant]
        assert r["status"] == "ok" and r["profiled_calls"] == 3 and r["process"] == "clean", r
        assert r["host_issue_ms"] > 0 and r["wall_ms"] > 0 and r["host_cpu_ms"] >= 0
        assert all(r[c] is None for c in profiled.DEVICE_COLUMNS) and r["device_message"] == profiled.NO_CUDA
    assert by["eager_cuda_graphs"]["status"] == "not_run"
    for variant in ("compiled", "eager_in_process"):
        assert by[variant]["status"] == "error" and "exit status 3" in by[variant]["message"]
    e2e = tables.frame("vision_e2e", _with_id(out["vision_e2e"]))
    timed = e2e.filter(pl.col("variant") != "eager_cuda_graphs")
    assert set(timed["status"]) == {"ok"} and set(timed["variant"]) == {"eager", "eager_channels_last", "compiled",
                                                                       "eager_in_process"}
    # the decomposition of these rows: partial, saying there is no CUDA device
    d = decomposition.vision_rows(e2e, prof)
    assert set(d["status"]) == {"partial"} and d["host_ms"].null_count() == d.height
    assert profiled.NO_CUDA in d.filter(pl.col("implementation") == "eager")["message"][0]


# ------------------------------------------------------------------------------------- the decomposition
CASE = {"model": "squeezenet1_1", "pair": "gpu", "batch_size": 1, "resolution": 224, "numerics": "fp32",
        "memory_format": "contiguous"}
# (variant, process, configuration, {invocation: times}); the clean variants repeat under every mode
TIMED = [("eager", "clean", "cuda", {0: [2.0, 2.2, 2.1], 1: [2.4, 2.4, 2.4]}),          # medians 2.1, 2.4 → 2.25
         ("eager_cuda_graphs", "clean", "cuda", {0: [0.8, 0.8], 1: [0.9, 0.9]}),        # → 0.85
         ("eager_channels_last", "clean", "cuda", {0: [2.5], 1: [2.5]})]
COMPILED = {"default": [("compiled", {0: [1.0], 1: [1.2]}), ("eager_in_process", {0: [2.3], 1: [2.3]})],
            "reduce-overhead": [("compiled", {0: [0.6], 1: [0.6]}), ("eager_in_process", {0: [2.3], 1: [2.3]})]}
# fake profiled passes: wall, device busy (→ idle = host), kernel time, kernels, launches
PROFILE = {("eager", None): (2.2, 0.7, 0.6, 60, 60), ("eager_cuda_graphs", None): (0.8, 0.62, 0.6, 60, 1),
           ("eager_channels_last", None): (2.5, 0.9, 0.8, 70, 70),
           ("compiled", "default"): (1.1, 0.45, 0.4, 30, 30), ("compiled", "reduce-overhead"): (0.6, 0.42, 0.4, 30, 1),
           ("eager_in_process", "default"): (2.3, 0.7, 0.6, 60, 60),
           ("eager_in_process", "reduce-overhead"): (2.3, 0.7, 0.6, 60, 60)}


def _e2e_row(mode, variant, process, configuration, inv, k, t, case=CASE, status="ok"):
    return {"run_id": "r1", **case, "configuration": configuration, "mode": mode, "variant": variant,
            "process": process, "invocation": inv, "round": k, "repeat": 0, "time_ms": t, "warmup_calls": 3,
            "steady": True, "status": status, "message": None}


def _fixture(case=CASE, profile=PROFILE, cpu=False):
    e2e, prof = [], []
    for mode in COMPILED:
        for variant, process, configuration, by_inv in TIMED:
            e2e += [_e2e_row(mode, variant, process, configuration, inv, k, t, case)
                    for inv, ts in by_inv.items() for k, t in enumerate(ts)]
        for variant, by_inv in COMPILED[mode]:
            cfg = "triton" if variant == "compiled" else "cuda"
            e2e += [_e2e_row(mode, variant, "compiled", cfg, inv, k, t, case)
                    for inv, ts in by_inv.items() for k, t in enumerate(ts)]
        for (variant, m), (wall, busy, device, kernels, launches) in profile.items():
            if m not in (None, mode):
                continue
            process = "clean" if m is None else "compiled"
            devices = (dict.fromkeys(profiled.DEVICE_COLUMNS) | {"device_message": profiled.NO_CUDA} if cpu else
                       {"device_ms": device, "memcpy_ms": 0.0, "kernels": kernels, "launch_calls": launches,
                        "device_busy_ms": busy, "device_idle_ms": wall - busy, "device_message": None})
            prof.append({"run_id": "r1", **case, "configuration": "triton" if variant == "compiled" else "cuda",
                         "mode": mode, "variant": variant, "process": process, "invocation": 0, "status": "ok",
                         "message": None, "profiled_calls": 5, "host_cpu_ms": wall * 0.8,
                         # a graph replay (one launch) issues in microseconds, the others most of the call
                         "host_issue_ms": wall * 0.9 if launches > 1 else 0.05,
                         "wall_ms": wall, "device_source": None if cpu else profiled.SOURCE, **devices})
    return tables.frame("vision_e2e", e2e), tables.frame("vision_profile", prof)


def _by(d: pl.DataFrame) -> dict:
    return {(r["implementation"], r["mode"]): r for r in d.iter_rows(named=True)}


def test_each_vision_level_is_its_arithmetic_and_the_clean_variants_count_once():
    e2e, prof = _fixture()
    d = decomposition.vision_rows(e2e, prof)
    by = _by(d)
    # eager and its baselines once (mode null), compiled and eager_in_process per mode
    assert sorted(by, key=str) == sorted([("eager", None), ("eager_cuda_graphs", None), ("eager_channels_last", None),
                                          ("compiled", "default"), ("compiled", "reduce-overhead"),
                                          ("eager_in_process", "default"), ("eager_in_process", "reduce-overhead")],
                                         key=str)
    eager = by[("eager", None)]
    assert eager["time_ms"] == pytest.approx(2.25)             # median of the invocations' medians (2.1, 2.4)
    assert eager["transfer_ms"] == 0.0 and eager["cell"] is None and eager["experiment"] == "vision_e2e"
    assert eager["host_ms"] == pytest.approx(2.2 - 0.7)        # wall - device busy
    assert eager["device_ms"] == pytest.approx(0.6)
    assert eager["other_ms"] == pytest.approx(2.25 - 1.5 - 0.6)
    assert eager["python_ms"] is eager["dispatch_ms"] is eager["launch_ms"] is None   # not separated in Study B
    assert eager["bound"] == "host" and eager["status"] == "ok" and eager["message"] is None
    assert eager["fusion_ms"] is None and eager["launch_saved_ms"] is None
    compiled = by[("compiled", "default")]
    assert compiled["time_ms"] == pytest.approx(1.1) and compiled["fusion_ms"] == pytest.approx(0.6 - 0.4)
    assert compiled["host_ms"] == pytest.approx(1.1 - 0.45)
    assert compiled["other_ms"] == pytest.approx(1.1 - 0.65 - 0.4)
    ro = by[("compiled", "reduce-overhead")]
    assert ro["fusion_ms"] == pytest.approx(0.2) and ro["launch_calls"] == 1 and ro["bound"] == "device"
    graphs = by[("eager_cuda_graphs", None)]
    assert graphs["launch_saved_ms"] == pytest.approx(2.25 - 0.85) and graphs["fusion_ms"] is None
    assert graphs["launch_calls"] == 1 and graphs["kernels"] == 60 and graphs["bound"] == "device"
    assert set(d["status"]) == {"ok"}
    # beside Study A's rows in one table
    both = decomposition.decomposition_rows(pl.DataFrame(schema=tables.schema("sweep")), None,
                                            vision_e2e=e2e, vision_profile=prof)
    assert both.height == d.height and set(both["experiment"]) == {"vision_e2e"}


def test_vision_rows_are_partial_and_say_why_where_a_level_cannot_be_separated():
    # the CPU pair: no device time, so host and device work are not separated
    cpu = {**CASE, "pair": "cpu"}
    e2e, prof = _fixture(case=cpu, cpu=True)
    d = decomposition.vision_rows(e2e, prof)
    assert set(d["status"]) == {"partial"}
    assert d["host_ms"].null_count() == d["other_ms"].null_count() == d["device_ms"].null_count() == d.height
    assert all(profiled.NO_CUDA in m for m in d["message"])
    assert d["launch_saved_ms"].drop_nulls().len() == 1        # the times still give the graph's saving
    # no profile of eager: compiled's fusion cannot be computed; a failed pass is named
    e2e, prof = _fixture(profile={k: v for k, v in PROFILE.items() if k[0] != "eager"})
    prof = prof.with_columns(status=pl.when(pl.col("variant") == "eager_channels_last").then(pl.lit("error"))
                             .otherwise(pl.col("status")),
                             message=pl.when(pl.col("variant") == "eager_channels_last")
                             .then(pl.lit("OutOfMemoryError: boom")).otherwise(pl.col("message")))
    by = _by(decomposition.vision_rows(e2e, prof))
    assert by[("eager", None)]["status"] == "partial" and by[("eager", None)]["message"] == (
        "no profiled pass for this variant")
    assert by[("compiled", "default")]["status"] == "partial"
    assert by[("compiled", "default")]["message"] == "fusion saved: no device time of eager"
    assert by[("compiled", "default")]["other_ms"] is not None   # its own levels are there
    cl = by[("eager_channels_last", None)]
    assert cl["status"] == "partial" and cl["message"] == "profiled pass error: OutOfMemoryError: boom"
    assert cl["device_ms"] is None
    # no eager time: no launch saving; no vision rows at all: none
    no_eager = e2e.filter(pl.col("variant") != "eager")
    assert _by(decomposition.vision_rows(no_eager, prof))[("eager_cuda_graphs", None)]["message"] == (
        "launch saved: no ok eager time in this setting")
    assert decomposition.vision_rows(e2e.clear(), None).is_empty()


def test_the_report_draws_study_bs_decomposition_with_a_sentence_from_its_rows():
    from abstraction_cost.report import decomposition as dc
    e2e, prof = _fixture()
    d = decomposition.decomposition_rows(pl.DataFrame(schema=tables.schema("sweep")), None, vision_e2e=e2e,
                                         vision_profile=prof)
    text = dc.vision_finding(d)
    assert "squeezenet1_1 (gpu · batch 1 · fp32 · contiguous): eager 2.25 ms, of which host levels 1.50 (67%)" in text
    assert "compiled (default) 1.10 ms: fusion saved 0.20 ms of kernel time" in text
    assert "one CUDA graph of eager saved 1.40 ms with 1 launch calls against eager's 60" in text
    assert dc.vision_figure(d) is not None
    shown = dc.vision_display(d)
    assert shown.height == 7 and {"host", "device work", "other", "fusion saved", "launch saved"} <= set(shown.columns)
    # Study A's figures and tables leave Study B's rows out
    assert dc.display(d).is_empty() and dc.stacked_figure(d) is None
    # no CUDA: the sentence says why there is no device work
    e2e, prof = _fixture(case={**CASE, "pair": "cpu"}, cpu=True)
    text = dc.vision_finding(decomposition.vision_rows(e2e, prof))
    assert "No device work for 7 of 7 variants, because: " in text and profiled.NO_CUDA in text
    # no profiled pass at all (a run before vision_profile existed): each reason once, though messages join several
    text = dc.vision_finding(decomposition.vision_rows(*_fixture()[:1], None))
    assert text.endswith("because: no profiled pass for this variant; fusion saved: no device time of eager."), text
    assert dc.vision_figure(decomposition.vision_rows(e2e.clear(), None)) is None
    assert "not decomposed" in dc.vision_finding(decomposition.vision_rows(e2e.clear(), None))


# --------------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_a_tiny_vision_e2e_step_on_the_gpu_profiles_eager_and_the_cuda_graph_with_fewer_launches(monkeypatch):
    monkeypatch.setattr(vm, "BACKEND", "eager")   # dynamo's eager backend: the compiled worker starts quickly
    config = _config(models={"gpu": ["squeezenet1_1"]}, baselines=["cuda_graphs"])
    config["device"] = "cuda"
    setting = vm.settings(config, "gpu")[0]
    records = vision_protocol.measure(config, "squeezenet1_1", "gpu", setting, None, None, "")
    out = vision_protocol.rows(config, "squeezenet1_1", "gpu", setting, records, None, 14)
    prof = tables.frame("vision_profile", _with_id(out["vision_profile"]))
    by = {r["variant"]: r for r in prof.iter_rows(named=True)}
    assert set(prof["status"]) == {"ok"}, prof.select("variant", "status", "message", "device_message").rows()
    eager, graphs = by["eager"], by["eager_cuda_graphs"]
    assert eager["device_ms"] > 0 and eager["kernels"] > 0 and eager["launch_calls"] > 0, eager
    assert graphs["device_ms"] > 0 and graphs["launch_calls"] < eager["launch_calls"], (graphs, eager)
    e2e = tables.frame("vision_e2e", _with_id(out["vision_e2e"]))
    assert set(e2e["status"]) == {"ok"}
    d = _by(decomposition.vision_rows(e2e, prof))
    assert d[("eager", None)]["status"] == "ok" and d[("eager", None)]["host_ms"] >= 0
    assert d[("eager_cuda_graphs", None)]["launch_saved_ms"] is not None
    assert d[("compiled", "default")]["fusion_ms"] is not None
