"""The interleaved sweep (study_a/sweep/conductor.py, sweep_worker.py, sweep_interleaved.py, native --serve): turns
in rotating order after every worker prepared the cell, invocations in fresh processes, a dead worker's cell an
error row and the worker started again, kept records not measured again, and the real job on the CPU."""
from __future__ import annotations

import datetime as dt
import json
import re
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from abstraction_cost.measure import statistics
from abstraction_cost.programs import native
from abstraction_cost.study_a.sweep import conductor as sweep_conductor, interleaved as sweep_interleaved
from abstraction_cost.study_a.sweep.cells import (PROTOCOL_DEFAULTS, Protocol, SweepConfigError, SweepSettings,
                                                  check, walk)
from abstraction_cost.study_a.sweep.conductor import Store, cell_row, conduct
from abstraction_cost.study_a.sweep.store import CellStore
from tests.fixtures.repository import REPO
from tests.fixtures.spare_cores import cores_by_command, saying_cores, spare_cores  # noqa: F401 (a fixture)
from tests.fixtures.sweep_jobs import interleaved_job, make_pool


# A worker speaking the protocol of native/common/sweep_serve.h: every call takes 1 ms; each command is appended to
# LOG as "<name> <command>"; worker b reports 0.25 s per load; DIE_AT=K makes it exit 3 when told to load or prepare
# cell K; a fourth argument makes it also append "<name> loaded K" just before it answers a load. Worker a says
# where its start went, as a Python worker does (sweep/worker.py's `up`).
FAKE_WORKER = textwrap.dedent('''
    import json, os, sys, time
    entered = time.monotonic()
    name, log, die_at, marks = sys.argv[1], sys.argv[2], int(sys.argv[3]), len(sys.argv) > 4
    def say(record):
        print(json.dumps(record), flush=True)
    up = {"entered_monotonic_s": entered, "inputs_s": 0.01, "cuda_s": 0.0, "model_s": 0.02,
          "ready_monotonic_s": time.monotonic()}
    say({"kind": "sweep_start", "cells": 0, "start_cell": 0, **({"up": up} if name == "a" else {})})
    cell = None
    for line in sys.stdin:
        op, _, arg = line.strip().partition(" ")
        with open(log, "a") as f:
            f.write(f"{name} {line.strip()}\\n")
        if op in ("load", "cell"):
            cell = int(arg)
            if cell == die_at:
                sys.exit(3)
            if op == "load":
                if marks:
                    with open(log, "a") as f:
                        f.write(f"{name} loaded {cell}\\n")
                say({"kind": "cell_loaded", "cell": cell, "prepare_s": 0.25 if name == "b" else 0})
            else:
                say({"kind": "ready", "cell": cell, "warmup_calls": 3, "steady": True, "call_ms": 1.0,
                     "prepare_s": 0})
        elif op == "time":
            say({"kind": "block", "cell": cell, "times_ms": [1.0] * int(arg), "h2d_ms": [0.1] * int(arg)})
        elif op == "profile":
            say({"kind": "profile", "cell": cell, "status": "ok", "profiled_calls": int(arg), "host_issue_ms": 0.5,
                 "host_cpu_ms": 0.4, "wall_ms": 1.0, "device_ms": None, "device_message": "fake"})
        elif op == "end":
            say({"kind": "cell", "cell": cell, "batch": 1, "resolution": 8, "transfer": "float32-pageable",
                 "status": "ok", "message": None, "times_ms": [1.0], "h2d_ms": [0.1], "h2d_bytes": 4,
                 "start_monotonic_s": 0.0, "end_monotonic_s": 1.0})
        elif op == "release":
            say({"kind": "released"})
    say({"kind": "sweep_done", "cells": 0})
''')


def _settings(**overrides) -> SweepSettings:
    s = dict(batches=(1, 2), resolutions=(8,), warmup=0, repeats=1, transfers=("float32-pageable",),
             implementations=("eager", "libtorch"), compile_modes=(), pool=2, kernel_batch=1,
             kernel_resolution=8, kernel_top=1, require_gpu=False)
    s.update(overrides)
    return SweepSettings(**s)


def _protocol(**overrides) -> Protocol:
    p = {**PROTOCOL_DEFAULTS, "invocations": 1, "blocks": 3, "block_ms": 2.0, **overrides}
    if "max_invocations" not in overrides:  # only the minimum, unless a test asks for more
        p["max_invocations"] = p["invocations"]
    return Protocol(**p)


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    log = tmp_path / "commands.log"

    def command_for(die: dict | None = None):
        die = die or {}
        return lambda impl, oom_at: [sys.executable, str(script), impl, str(log), str(die.get(impl, -1))]
    return SimpleNamespace(command_for=command_for, log=log)


def test_every_worker_loads_a_cell_at_once_then_warms_up_alone_before_any_is_timed_and_turns_rotate(fake):
    cells = walk([1, 2], [8], ["float32-pageable"])
    records = conduct(["a", "b", "c"], fake.command_for(), cells, _settings(), _protocol(blocks=3),
                      Store(None, ["a", "b", "c"], len(cells)))
    lines = fake.log.read_text().splitlines()
    first_cell = lines[:lines.index("a load 1")]
    # the loads are sent together (their order in the log is the processes'), every one answered before a warm-up
    assert sorted(first_cell[:3]) == ["a load 0", "b load 0", "c load 0"]
    assert first_cell[3:6] == ["a cell 0", "b cell 0", "c cell 0"]
    turns = [line.split()[0] for line in first_cell if line.split()[1] == "time"]
    assert turns == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    # calls per turn fill block_ms (2 ms of 1 ms calls)
    assert all(line.endswith("time 2") for line in first_cell if " time " in line)
    assert [r["status"] for r in records] == ["ok"] * 6
    assert [len(r["blocks"]) for r in records] == [3] * 6 and records[0]["turns"] == [0, 1, 2]


def test_workers_start_and_load_on_the_spare_cores_too_and_warm_up_and_turn_on_the_jobs(fake, tmp_path,
                                                                                          spare_cores):
    """gpus.spread_loads: each worker reads its cores as it answers each command; a load (and the start-up before
    it) may use the job's and the spare cores, its warm-up and turns the job's alone."""
    job, spare = spare_cores
    script = tmp_path / "cores_worker.py"
    script.write_text(saying_cores(FAKE_WORKER, 'f.write(f"{name} {line.strip()}\\n")'))
    cells = walk([1], [8], ["float32-pageable"])
    records = conduct(["a", "b"], lambda impl, oom_at: [sys.executable, str(script), impl, str(fake.log), "-1"],
                      cells, _settings(), _protocol(invocations=2, blocks=2, profile_calls=0),
                      Store(None, ["a", "b"], len(cells)))
    assert [r["status"] for r in records] == ["ok"] * 4
    seen = cores_by_command(fake.log.read_text().splitlines())
    assert seen["load"] == {str(sorted(job | spare))}
    assert seen["cell"] == seen["time"] == {str(sorted(job))}


def test_a_worker_that_times_algorithms_as_it_loads_loads_alone_after_the_others(fake):
    """Under cuDNN's benchmark mode (or cudnnFind, max-autotune) a worker's load times candidate algorithms: with
    no other worker loading beside it, its choice is made on a GPU of its own. Two invocations walking together:
    every other worker of both loads at once, then each worker of `alone` by itself, and the cells' turns are as
    without it."""
    cells = walk([1, 2], [8], ["float32-pageable"])
    command_for = lambda impl, oom_at: fake.command_for()(impl, oom_at) + ["mark"]   # noqa: E731
    for first_alone in (False, True):
        fake.log.unlink(missing_ok=True)
        records = conduct(["a", "b", "c"], command_for, cells, _settings(),
                          _protocol(invocations=3, blocks=2, profile_calls=0),
                          Store(None, ["a", "b", "c"], len(cells)), alone=frozenset({"b", "c"}),
                          first_alone=first_alone)
        lines = fake.log.read_text().splitlines()
        for cell in (0, 1):
            loads = [line for line in lines if line.split()[1:] in (["load", str(cell)], ["loaded", str(cell)])]
            assert len(loads) == 2 * 3 * 3   # each worker's load and loaded, in three invocations
            # all three walking together, or invocation 0 alone and then 1 and 2 together
            for walked in ([loads[:6], loads[6:]] if first_alone else [loads]):
                solo = [k for k, line in enumerate(walked) if line.split()[0] in "bc"]
                together = [k for k, line in enumerate(walked) if line.split()[0] == "a"]
                assert max(together) < min(solo)   # a's loads all answered before b or c loads
                # b and c one at a time: each load followed at once by its own answer
                assert all(walked[k].split()[0] == walked[k + 1].split()[0] and walked[k].split()[1] == "load"
                           for k in solo[::2])
    assert [r["status"] for r in records] == ["ok"] * 18 and all(len(r["blocks"]) == 2 for r in records)


def test_each_turns_row_names_the_cpu_it_was_taken_on_and_that_cpus_probe(fake, monkeypatch):
    """The turns' host, per turn: whatever the pick before a turn chose is the CPU and probe of every
    implementation's block in that turn (sweep_blocks' cpu, host_op_us), so a slow turn can be set against its
    probe."""
    from contextlib import contextmanager
    from abstraction_cost.measure import affinity
    picks = iter([(3, 1.5), (5, 2.5), (3, 1.4)] * 2)

    class Picked:
        cpu = op_us = None

        def pick(self):
            self.cpu, self.op_us = next(picks)
            return self.cpu

    @contextmanager
    def placed(pids):
        yield Picked()
    monkeypatch.setattr(affinity, "turns_on_one_cpu", placed)
    cells = walk([1, 2], [8], ["float32-pageable"])
    records = conduct(["a", "b"], fake.command_for(), cells, _settings(), _protocol(blocks=3),
                      Store(None, ["a", "b"], len(cells)))
    rows = sweep_conductor.block_rows([r for r in records if r["implementation"] == "a"])
    assert [(r["cell"], r["turn"], r["cpu"], r["host_op_us"]) for r in rows] == [
        (0, 0, 3, 1.5), (0, 1, 5, 2.5), (0, 2, 3, 1.4), (1, 0, 3, 1.5), (1, 1, 5, 2.5), (1, 2, 3, 1.4)]
    unplaced = sweep_conductor.block_rows([{"status": "ok", "cell": 0, "turns": [0], "blocks": [[1.0]]}])
    assert unplaced[0]["cpu"] is None and unplaced[0]["host_op_us"] is None


def test_the_invocation_log_names_the_slowest_loaders_by_their_own_load_times(fake, caplog):
    cells = walk([1, 2], [8], ["float32-pageable"])
    with caplog.at_level("INFO", logger=sweep_conductor.__name__):
        conduct(["a", "b"], fake.command_for(), cells, _settings(), _protocol(), Store(None, ["a", "b"], len(cells)))
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("invocation 0: ") and
                " s: start-up " in r.getMessage())
    assert "loading by worker: b 0.5 s, a 0.0 s" in line, line
    assert re.search(r"start-up by worker: [ab] \d+\.\d s, [ab] \d+\.\d s", line), line
    # where the Python worker's start went: its launch to its main (the interpreter, imports), then its parts
    start = next(r.getMessage() for r in caplog.records if "slowest start" in r.getMessage())
    assert re.fullmatch(r"invocation 0: slowest start [ab] \d+\.\d s; slowest Python worker a \d+\.\d s: to its "
                        r"main \d+\.\d s, inputs 0\.0 s, CUDA context 0\.0 s, model 0\.0 s", start), start


def test_a_python_workers_start_is_its_own_stamps_not_when_the_conductor_read_it():
    """The conductor reads the workers' first records one after another: a worker up at 1 s and read at 5 s, after a
    slow one, started in 1 s; a worker without stamps (a C++ one) counts until it is read."""
    now = time.monotonic()
    up = {"entered_monotonic_s": now - 4.5, "inputs_s": 0.1, "cuda_s": 0.2, "model_s": 0.2,
          "ready_monotonic_s": now - 4.0}
    parts = sweep_conductor.start_parts({"kind": "sweep_start", "up": up}, now - 5.0)
    assert parts == pytest.approx({"up_s": 1.0, "imports_s": 0.5, "inputs_s": 0.1, "cuda_s": 0.2, "model_s": 0.2})
    assert sweep_conductor.start_parts({"kind": "sweep_start"}, now - 5.0)["up_s"] >= 5.0


def test_a_python_workers_spec_is_not_written_again_while_a_worker_of_it_may_be_reading_it(tmp_path, monkeypatch):
    """The invocations' workers of one implementation start together: the next one's command line writes no file the
    first may be reading (a rewrite empties it first: a sweep worker on a GPU read it empty), and a worker started
    again with cells to skip reads a spec of its own, not the one the others read."""
    command = sweep_conductor.python_worker_command({"implementation": "eager", "cells": [[0, 1, 8]]}, tmp_path)
    first = command("")
    written = []
    write_text = Path.write_text
    monkeypatch.setattr(Path, "write_text", lambda self, *a, **k: written.append(self) or write_text(self, *a, **k))
    assert command("") == first and command("") == first and written == []
    again = command("1x8")
    assert again != first and len(written) == 1
    assert json.loads(Path(first[-1]).read_text())["oom_at"] == ""
    assert json.loads(Path(again[-1]).read_text())["oom_at"] == "1x8"


def test_a_cell_too_large_to_share_the_device_is_measured_one_implementation_at_a_time(fake):
    cells = walk([1, 64], [8], ["float32-pageable"])
    conduct(["a", "b"], fake.command_for(), cells, _settings(), _protocol(blocks=2, interleave_max_pixels=8 * 8 * 2),
            Store(None, ["a", "b"], len(cells)))
    lines = fake.log.read_text().splitlines()
    large = lines[lines.index("a cell 1"):]
    timed = ["a cell 1", "a time 2", "a time 2", "a end", "a release", "b cell 1", "b time 2", "b time 2", "b end",
             "b release"]
    assert large[:10] == timed
    # then the profiled passes, each cell prepared again; the large one released after each worker's pass
    assert large[10:] == ["a cell 0", "a profile 5", "a end", "b cell 0", "b profile 5", "b end",
                          "a cell 1", "a profile 5", "a end", "a release", "b cell 1", "b profile 5", "b end",
                          "b release"]


def test_no_worker_times_a_call_after_its_profiled_pass_which_only_the_first_invocation_has(fake):
    """A process stays slower once the profiler has run in it: each worker's passes follow all its timed turns."""
    cells = walk([1, 2], [8], ["float32-pageable"])
    records = conduct(["a", "b"], fake.command_for(), cells, _settings(), _protocol(invocations=2, blocks=2),
                      Store(None, ["a", "b"], len(cells)))
    lines = fake.log.read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if " profile " in line)
    first = lines[:last + 1]   # invocation 0 up to its last profiled pass
    for worker in ("a", "b"):
        mine = [line for line in first if line.startswith(f"{worker} ")]
        profiles = [i for i, line in enumerate(mine) if " profile " in line]
        assert len(profiles) == 2 and max(i for i, line in enumerate(mine) if " time " in line) < min(profiles)
    assert sum(" profile " in line for line in lines) == 4  # none in the second invocation
    by = {(r["invocation"], r["implementation"]): r for r in records}
    assert by[(0, "a")]["profile"]["host_issue_ms"] == 0.5 and "profile" not in by[(1, "a")]
    none = conduct(["a"], fake.command_for(), cells, _settings(), _protocol(profile_calls=0),
                   Store(None, ["a"], len(cells)))
    assert "profile" not in none[0]


def test_each_invocation_is_a_fresh_set_of_processes_and_a_dead_worker_is_started_again(fake):
    cells = walk([1, 2, 4], [8], ["float32-pageable"])
    records = conduct(["a", "b"], fake.command_for({"b": 1}), cells, _settings(), _protocol(invocations=2, blocks=1),
                      Store(None, ["a", "b"], len(cells)))
    by = {(i // 6, r["cell"], ["a", "b"][i % 2]): r for i, r in enumerate(records)}
    assert by[(0, 1, "b")]["status"] == "error" and by[(0, 1, "b")]["exit_status"] == 3
    assert "exited with code 3" in by[(0, 1, "b")]["message"]
    assert by[(0, 2, "b")]["status"] == "ok" and by[(1, 2, "b")]["status"] == "ok"
    assert all(by[(inv, c, "a")]["status"] == "ok" for inv in (0, 1) for c in (0, 1, 2))


def test_the_first_invocations_walk_the_cells_together_and_are_timed_one_after_another(fake):
    """Invocations 0, 1 and 2: their six workers start at once, and each cell is loaded by all six before any is
    warmed up or timed; then invocation 0's warm-ups and turns, then 1's, then 2's; invocation 0's profiled pass
    comes after every timed call. Each process is named by its launch (impl@n)."""
    import itertools
    launches = itertools.count()
    base = fake.command_for()
    command_for = lambda impl, oom_at: [*base(f"{impl}@{next(launches)}", oom_at)]
    cells = walk([1, 2], [8], ["float32-pageable"])
    records = conduct(["a", "b"], command_for, cells, _settings(), _protocol(invocations=3, blocks=2),
                      Store(None, ["a", "b"], len(cells)))
    assert {(r["invocation"], r["implementation"], r["cell"]) for r in records if r["status"] == "ok"} == {
        (i, impl, c) for i in range(3) for impl in "ab" for c in range(2)}
    lines = fake.log.read_text().splitlines()
    invs = [("a@0", "b@1"), ("a@2", "b@3"), ("a@4", "b@5")]
    ops = lambda who, op: [i for i, line in enumerate(lines) if line.split()[0] in who and line.split()[1] == op]
    everyone = invs[0] + invs[1] + invs[2]
    loads = [i for i, line in enumerate(lines) if line.split()[1:] == ["load", "0"]]
    assert len(loads) == 6 and max(loads) < min(ops(everyone, "cell") + ops(everyone, "time"))
    profiles = ops(everyone, "profile")
    assert {lines[i].split()[0] for i in profiles} == set(invs[0]) and min(profiles) > max(ops(everyone, "time"))
    cell_1 = min(ops(everyone, "load")[6:])
    passes = min(i for i in ops(everyone, "cell") if i > max(ops(everyone, "time")))   # the profiled pass's walk
    for walked in (range(0, cell_1), range(cell_1, passes)):   # each cell: one invocation after another
        mine = lambda who: [i for i in walked if lines[i].split()[0] in who  # noqa: E731
                            and lines[i].split()[1] in ("cell", "time", "end")]
        assert all(max(mine(earlier)) < min(mine(later)) for earlier, later in zip(invs, invs[1:]))


def test_with_a_cold_compile_the_first_invocation_walks_alone_then_the_later_ones_together(fake):
    """first_alone (an implementation compiles cold as it loads): invocation 0 walks alone; then each cell is loaded
    by all four workers of invocations 1 and 2 before either is timed, then invocation 1's turns, then invocation
    2's; a cell one set may hold but not two is walked one invocation at a time, each releasing it before the next
    loads it. Each process is named by its launch (impl@n)."""
    import itertools
    launches = itertools.count()
    base = fake.command_for()
    command_for = lambda impl, oom_at: [*base(f"{impl}@{next(launches)}", oom_at)]
    cells = walk([1, 2], [8], ["float32-pageable"])
    records = conduct(["a", "b"], command_for, cells, _settings(),
                      _protocol(invocations=3, blocks=2, profile_calls=0, interleave_max_pixels=8 * 8 * 2),
                      Store(None, ["a", "b"], len(cells)), first_alone=True)
    assert {(r["invocation"], r["implementation"], r["cell"]) for r in records if r["status"] == "ok"} == {
        (i, impl, c) for i in range(3) for impl in "ab" for c in range(2)}
    lines = fake.log.read_text().splitlines()
    at = lambda who, op: [i for i, line in enumerate(lines) if line.split()[0] in who and line.split(" ", 1)[1] == op]
    inv1, inv2 = ("a@2", "b@3"), ("a@4", "b@5")   # invocation 0: a@0, b@1, alone
    assert max(at(("a@0", "b@0", "a@1", "b@1"), "end")) < min(at(inv1 + inv2, "load 0"))
    start, middle = min(at(inv1 + inv2, "load 0")), min(at(inv1 + inv2, "load 1"))
    who = [line.split()[0] for line in lines]
    # cell 0 (64 pixels, twice within 128): all four load it, then invocation 1 is timed and ends it (2 warm-ups, 4
    # turns, 2 ends), then invocation 2
    assert sorted(lines[start:start + 4]) == ["a@2 load 0", "a@4 load 0", "b@3 load 0", "b@5 load 0"]
    assert set(who[start + 4:start + 12]) == set(inv1) and set(who[start + 12:middle]) == set(inv2)
    assert middle - start == 20
    # cell 1 (128 pixels: one set may hold it, not two): invocation 1 loads, times, ends and releases it, then 2
    assert set(who[middle:middle + 12]) == set(inv1) and set(who[middle + 12:middle + 24]) == set(inv2)
    assert len(at(inv1, "release")) == len(at(inv2, "release")) == 2 and max(at(inv1, "release")) < middle + 12

    # prepare_together off: invocation 2's workers start only once invocation 1's have ended
    fake.log.unlink()
    launches = itertools.count()
    conduct(["a", "b"], command_for, cells, _settings(),
            _protocol(invocations=3, blocks=2, profile_calls=0, prepare_together=False),
            Store(None, ["a", "b"], len(cells)), first_alone=True)
    lines = fake.log.read_text().splitlines()
    assert max(at(inv1, "end")) < min(at(inv2, "load 0"))


def test_invocations_after_the_minimum_measure_only_the_cells_not_yet_precise(tmp_path):
    """Worker b's cell 1 varies between invocations (its calls take 1, 2, 1, 2... ms by invocation); every other
    time is steady. After the two invocations every cell gets, only cell 1 is walked again, by both workers (its
    turns stay paired), until max_invocations."""
    script = tmp_path / "varying.py"
    script.write_text(FAKE_WORKER.replace('"times_ms": [1.0], "h2d_ms"', '"times_ms": [T], "h2d_ms"').replace(
        "name, log, die_at, marks = sys.argv[1], sys.argv[2], int(sys.argv[3]), len(sys.argv) > 4",
        "name, log, die_at, marks = sys.argv[1], sys.argv[2], int(sys.argv[3]), len(sys.argv) > 4\n"
        "inv = len([l for l in open(log) if l.startswith(name + ' cell 0')]) if os.path.exists(log) else 0"
    ).replace('    elif op == "end":\n', '    elif op == "end":\n'
              '        T = 1.0 + (name == "b" and cell == 1) * (inv % 2)\n'))
    log = tmp_path / "commands.log"
    cells = walk([1, 2], [8], ["float32-pageable"])
    command_for = lambda impl, oom_at: [sys.executable, str(script), impl, str(log), "-1"]  # noqa: E731
    records = conduct(["a", "b"], command_for, cells, _settings(),
                      _protocol(invocations=2, max_invocations=4, precision=0.05, blocks=1,
                                profile_calls=0),
                      Store(None, ["a", "b"], len(cells)), first_alone=True)   # one invocation after another: the
    # fake worker counts the invocations before its own in the log as it starts
    walked = [(r["invocation"], r["implementation"], r["cell"]) for r in records]
    assert walked == [(0, "a", 0), (0, "b", 0), (0, "a", 1), (0, "b", 1), (1, "a", 0), (1, "b", 0), (1, "a", 1),
                      (1, "b", 1), (2, "a", 1), (2, "b", 1), (3, "a", 1), (3, "b", 1)]


def test_kept_records_are_not_measured_again(fake, tmp_path):
    cells = walk([1, 2], [8], ["float32-pageable"])
    store = CellStore(tmp_path / "kept", "key")
    first = conduct(["a", "b"], fake.command_for(), cells, _settings(), _protocol(invocations=2),
                    Store(store, ["a", "b"], len(cells)))

    def no_launch(impl, oom_at):
        raise AssertionError(f"{impl} launched although every record is kept")
    again = conduct(["a", "b"], no_launch, cells, _settings(), _protocol(invocations=2),
                    Store(CellStore(tmp_path / "kept", "key"), ["a", "b"], len(cells)))
    assert again == first


def test_a_row_pools_its_ok_invocations_and_says_how_many_failed():
    ok = lambda inv, t: {"status": "ok", "times_ms": t, "h2d_ms": [0.1] * len(t), "invocation": inv,  # noqa: E731
                         "blocks": [t], "steady": True}
    row = cell_row([ok(0, [4.0, 4.2, 4.1]), {"status": "oom", "message": "out of memory", "invocation": 1},
                    ok(2, [6.0, 6.1, 5.9])], batch=2)
    assert row["status"] == "ok" and row["invocations"] == 2 and row["repeats"] == 6
    assert row["time_ms"] == pytest.approx((4.1 + 6.0) / 2)
    assert row["time_ms_low"] <= 4.2 and row["time_ms_high"] >= 5.9  # the interval spans the invocations
    assert row["time_per_sample_ms"] == pytest.approx(row["time_ms"] / 2)
    assert row["message"] == "invocation 1: oom: out of memory"
    assert row["invocation_spread"] == pytest.approx(6.0 / 4.1)
    failed = cell_row([{"status": "oom", "message": "m", "invocation": 0}], batch=1)
    assert failed["status"] == "oom" and failed["invocations"] == 0


def test_hierarchical_interval_covers_the_true_median_at_about_its_rate_where_one_level_does_not():
    """Invocation effects (sd 1) and call noise (sd 0.3) around a true median of 10: 5 invocations of 20 calls.
    The two-level interval covers 10 at about its 95%; the interval of the pooled calls, which treats every call as
    independent, covers it far less often."""
    hits_two = hits_pooled = 0
    trials = 150
    for seed in range(trials):
        rng = np.random.default_rng(1000 + seed)
        groups = [10 + rng.normal(0, 1) + rng.normal(0, 0.3, 20) for _ in range(5)]
        hits_two += statistics.hierarchical_interval(groups, resamples=500, seed=seed).includes(10)
        hits_pooled += statistics.median_interval(np.concatenate(groups), resamples=500, seed=seed).includes(10)
    assert hits_two / trials >= 0.80
    assert hits_pooled / trials <= 0.5


def test_paired_turns_cancel_a_slow_period_that_independent_resampling_keeps():
    """Both implementations meet the same host periods (a turn's factor of 1 to 1.6); the treatment is 1.25×
    faster. Resampled as pairs the interval is narrow around 1.25; resampled independently it is wide."""
    rng = np.random.default_rng(0)
    host = [rng.choice([1.0, 1.3, 1.6], size=8) for _ in range(3)]
    base = [list(5.0 * h * rng.normal(1, 0.01, 8)) for h in host]
    treat = [list(4.0 * h * rng.normal(1, 0.01, 8)) for h in host]
    paired = statistics.paired_speedup(base, treat, resamples=2000)
    independent = statistics.speedup(sum(base, []), sum(treat, []), resamples=2000)
    assert paired.low <= 1.25 <= paired.high and paired.high - paired.low < 0.05
    assert independent.high - independent.low > 4 * (paired.high - paired.low)
    with pytest.raises(ValueError, match="same invocations and turns"):
        statistics.paired_speedup(base, [t[:-1] for t in treat])


def test_a_paired_speedup_of_three_invocations_covers_the_true_ratio_despite_process_levels():
    """Each side of a pair runs in its own process, at its own host level (sd 0.2 on the log scale, as eager's
    batch-1 processes on an H100 VM); the true ratio is 1.25. Three invocations of 8 turns: the bootstrap alone
    cannot reach past the three ratios it has; with the t-interval of the invocations' ratios it covers 1.25 at
    about its rate."""
    hits = boot_hits = 0
    trials = 200
    for seed in range(trials):
        rng = np.random.default_rng(500 + seed)
        base, treat = [], []
        for _ in range(3):
            b_level, t_level = np.exp(rng.normal(0, 0.2, 2))
            base.append(list(5.0 * b_level * rng.normal(1, 0.02, 8)))
            treat.append(list(4.0 * t_level * rng.normal(1, 0.02, 8)))
        s = statistics.paired_speedup(base, treat, resamples=400, seed=seed)
        hits += s.low <= 1.25 <= s.high
        ratios = sorted(np.median(b) / np.median(t) for b, t in zip(base, treat))
        boot_hits += ratios[0] <= 1.25 <= ratios[-1]   # the widest the bootstrap can reach
    assert hits / trials >= 0.88
    assert boot_hits / trials <= 0.85


@pytest.mark.parametrize("key,value,message", [
    ("invocations", 0, "'study_a.sweep.protocol.invocations': 0 is not an integer >= 1"),
    ("blocks", 1.5, "'study_a.sweep.protocol.blocks': 1.5 is not an integer >= 1"),
    ("block_ms", -1, "'study_a.sweep.protocol.block_ms': -1 is not a positive number of milliseconds"),
    ("precision", 0, "'study_a.sweep.protocol.precision': 0 is not a positive relative half width"),
    ("mode", "parallel", "'study_a.sweep.protocol.mode': 'parallel' is not one of"),
    ("profile_calls", -1, "'study_a.sweep.protocol.profile_calls': -1 is not an integer >= 0"),
    ("prepare_together", "yes", "'study_a.sweep.protocol.prepare_together': 'yes' is not true or false"),
    ("turns", 3, "'study_a.sweep.protocol.turns': unknown key"),
])
def test_a_bad_protocol_value_is_refused_naming_its_key(key, value, message):
    s = {"batches": [1], "resolutions": [8], "warmup": 0, "repeats": 1, "transfers": ["float32-pageable"],
         "implementations": ["eager"], "numerics": ["fp32"], "pool": 1, "require_gpu": False,
         "kernels": {"batch_size": 1, "resolution": 8, "top": 1}, "protocol": {key: value}}
    with pytest.raises(SweepConfigError, match=message.replace("(", r"\(")):
        check(s)


def test_the_interleaved_job_measures_python_and_cpp_workers_in_turns_under_injected_faults(tmp_path, monkeypatch,
                                                                                             caplog):
    """Rule sweep's interleaved job on the CPU: eager (a Python worker) and libtorch (ac_libtorch --serve), an oom
    at cell 1 (batch 1, 8 px, uint8-pinned: batch 2 there is skipped), a crash at cell 2 (eager: an error row;
    libtorch: the program dies, its cell is an error row with its exit status, and it is started again) and a
    wrong output at cell 5 (libtorch's saved logits perturbed: caught by the check against eager's)."""
    from abstraction_cost import config as config_module, tables
    from abstraction_cost.models import resnet, weights_file
    config = config_module.load(REPO / "config/smoke.yaml")
    config["study_a"]["sweep"].update(batches=[1, 2], resolutions=[8, 16], repeats=1, warmup=0,
                                      protocol={"invocations": 1, "max_invocations": 1, "blocks": 2,
                                                "block_ms": 1, "warmup_max": 0})
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    # a compile warm-up's manifest (compile_warm_up.py): its cold builds are the rows' cold_build_s
    warm_up = tmp_path / "warm-up.json"
    warm_up.write_text(json.dumps({"builds": {"eager": [{"cell": 0, "build_s": 1.5}, {"cell": 2, "build_s": None}]}}))
    inputs = SimpleNamespace(inputs=str(make_pool(tmp_path)), weights=str(weights),
                             program_libtorch=str(native.ensure_built("libtorch")), warm_up=str(warm_up))
    job = interleaved_job(config, inputs, "fp32", tmp_path)
    monkeypatch.setenv("AC_FAULT", "cell:oom@1,cell:crash@2,cell:wrong@5")
    started = time.time()
    with caplog.at_level("INFO", logger=sweep_conductor.__name__):
        sweep_interleaved.run(job)
    # the Python worker's start, split where it went (no CUDA context on the CPU)
    split = (r"slowest Python worker eager [\d.]+ s: to its main [\d.]+ s, inputs [\d.]+ s, CUDA context 0\.0 s, "
             r"model [\d.]+ s")
    assert any(re.search(split, r.getMessage()) for r in caplog.records)
    df = tables.read("sweep", job.output.table)
    by = {impl: df.filter(df["implementation"] == impl) for impl in ("eager", "libtorch")}
    for impl, frame in by.items():
        assert frame["cell"].to_list() == list(range(8))
        assert frame["status"][0] == "ok" and frame["status"][1] == "oom" and frame["status"][2] == "error"
        assert frame["message"][3] == "skipped: batch 1 already out of memory at this resolution"
        assert frame["status"][5] == "wrong_output" and frame["time_ms"][5] is None
        assert frame["status"][7] == "ok" and frame["time_per_sample_ms"][7] > 0
        assert frame["blocks"][7] == 2 and frame["invocations"][7] == 1 and frame["protocol"][7] == "interleaved"
    assert by["eager"]["cold_build_s"].to_list() == [1.5] + [None] * 7
    assert by["libtorch"]["cold_build_s"].null_count() == 8
    assert by["libtorch"]["exit_status"][2] is not None and "SIGSEGV" in by["libtorch"]["message"][2]
    assert by["libtorch"]["message"][5].startswith("libtorch at input (1, 3, 16, 16): logits differ from eager's")
    env = tables.read("environment", job.output.env)
    assert df["run_id"].n_unique() == 1 and env.height == 1
    # its invocation's workers' start-up and loading, inside the measured run: the run time's breakdown counts
    # them as start-up and builds
    run_s = (dt.datetime.fromisoformat(env["ended_at"][0]) - dt.datetime.fromisoformat(env["started_at"][0]))
    assert env["worker_start_s"][0] > 0 and env["worker_load_s"][0] > 0
    assert env["worker_start_s"][0] + env["worker_load_s"][0] < run_s.total_seconds()
    blocks = tables.read("sweep_blocks", job.output.blocks)
    assert blocks.filter(blocks["cell"] == 7).height == 4  # two turns each
    # the profiled pass after each cell's turns: host columns measured, device columns null with the reason
    profile = tables.read("sweep_profile", job.output.profile)
    for impl in ("eager", "libtorch"):
        mine = profile.filter(profile["implementation"] == impl).sort("cell")
        assert mine["cell"].to_list() == list(range(8))
        assert mine["status"][1] == "not_run" and mine["message"][1] == "cell oom: nothing to profile"
        ok = mine.filter(mine["status"] == "ok")
        assert ok.height >= 4 and ok["profiled_calls"].to_list() == [5] * ok.height
        assert (ok["host_issue_ms"] > 0).all() and (ok["wall_ms"] >= ok["host_issue_ms"] * 0.5).all()
        assert ok["device_ms"].null_count() == ok.height and ok["device_message"].null_count() == 0
    for impl in ("eager", "libtorch"):  # libtorch's trace (LibTorch's Kineto profiler, CPU activity) read
        messages = profile.filter(profile["implementation"] == impl, profile["status"] == "ok")["device_message"]
        assert set(messages) == {"no CUDA device: no kernels to profile"}, impl
    # the kernel table's rows at the kernel point (batch 2 at 16 px, the grid's nearest to 32, float32 pageable:
    # cell 6), one per implementation: no kernels without CUDA, and why
    kernels = tables.read("sweep_kernels", job.output.kernels).sort("implementation")
    assert kernels["implementation"].to_list() == ["eager", "libtorch"]
    assert kernels.select("batch_size", "resolution", "transfer").unique().rows() == [(2, 16, "float32-pageable")]
    assert set(kernels["status"]) == {"not_run"} and set(kernels["message"]) == {"no CUDA device: no kernels to profile"}
    left = [p for p in [*tmp_path.rglob("ac-profile-*"), *Path(tempfile.gettempdir()).glob("ac-profile-*")]
            if p.stat().st_mtime >= started]
    assert not left, left  # the conductor deletes each trace it read


def test_the_serve_mode_refuses_a_command_it_does_not_know(tmp_path):
    program = native.ensure_built("libtorch")
    pool = make_pool(tmp_path)
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    command = [str(program), "sweep", "--model", "libtorch", "--device", "cpu", "--tf32", "0", "--cudnn-benchmark", "0",
               "--channels", "3", "--pool", "2", "--inputs", str(pool), "--mean", "0.5,0.5,0.5",
               "--std", "0.25,0.25,0.25", "--batches", "1", "--resolutions", "8", "--warmup", "0", "--repeats", "1",
               "--transfers", "float32-pageable", "--weights", str(weights), "--classes", "10", "--serve", "1"]
    import subprocess
    result = subprocess.run(command, input="load 0\ncell 0\nfly 3\n", capture_output=True, text=True, timeout=120,
                            env=native.runtime_env())
    records = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert result.returncode != 0 and \
        "'fly 3' is not 'load K', 'cell K', 'time N', 'profile N', 'end' or 'release'" in result.stderr
    assert [r["kind"] for r in records if r["kind"] in ("sweep_start", "cell_loaded", "ready")] == \
        ["sweep_start", "cell_loaded", "ready"]
