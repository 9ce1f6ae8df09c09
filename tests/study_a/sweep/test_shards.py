"""The interleaved sweep split into shards (study_a/sweep/shards.py, study_a.sweep.shards): whole resolutions per
shard, balanced by estimated cost; a shard's job walks only its cells under the whole grid's indices; the oom-skip
rule gives the same rows as the unsharded job; the shards' tables concatenate to the unsharded job's rows; the
rule makes one timing job per (numerics, shard)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

from abstraction_cost import config as config_module
from abstraction_cost import tables
from abstraction_cost.programs import native
from abstraction_cost.study_a.sweep import interleaved as sweep_interleaved, shards as sweep_shards
from abstraction_cost.study_a.sweep.cells import SweepConfigError, SweepSettings, walk
from abstraction_cost.study_a.sweep.conductor import Store, conduct
from tests.fixtures.repository import REPO
from tests.fixtures.sweep_jobs import interleaved_job, make_pool
from tests.study_a.sweep.test_interleaved import _protocol, _settings, fake  # noqa: F401 (fixture)



def _config(**sweep) -> dict:
    config = config_module.load(REPO / "config" / "config.yaml")
    config["study_a"]["sweep"].update(sweep)
    return config


@pytest.mark.parametrize("name", ["config", "paper", "gpu-smoke", "smoke"])
def test_every_cell_is_in_exactly_one_shard_and_every_resolution_in_one_shard(name):
    config = config_module.load(REPO / "config" / f"{name}.yaml")
    resolutions = config["study_a"]["sweep"]["resolutions"]
    for shards in range(1, len(set(resolutions)) + 1):
        config["study_a"]["sweep"]["shards"] = shards
        plan = sweep_shards.of_config(config)
        assert len(plan) == shards and all(plan)
        cells = [c for shard in plan for c in shard]
        assert sorted(c.index for c in cells) == [c.index for c in SweepSettings.from_config(config).cells()]
        owner = {}
        for k, shard in enumerate(plan):
            assert [c.index for c in shard] == sorted(c.index for c in shard)   # the walk's order
            for c in shard:
                assert owner.setdefault(c.resolution, k) == k, (name, shards, c)


def test_shards_are_balanced_by_estimated_cost_costliest_resolution_first():
    """Longest processing time first: the 1024 px row (the costliest, by far) alone, the rest together; three
    shards split the rest so that no shard is costlier than it need be."""
    settings = _settings(batches=(8, 32, 128, 512), resolutions=(32, 128, 256, 1024), repeats=10, warmup=1,
                         transfers=("float32-pageable",), cell_budget_s=3)
    two = sweep_shards.plan(settings, 2, 6, 50)
    assert [sorted({c.resolution for c in s}) for s in two] == [[1024], [32, 128, 256]]
    three = sweep_shards.plan(settings, 3, 6, 50)
    costs = [sum(sweep_shards.cell_cost_s(c, settings, 6, 50) for c in s) for s in three]
    assert [sorted({c.resolution for c in s}) for s in three][0] == [1024]
    assert max(costs[1:]) < costs[0]
    # a costlier cell costs more: calls grow with batch x resolution^2, cut at the cell budget
    small, large = (sweep_shards.cell_cost_s(c, settings, 6, 50) for c in (two[1][0], two[0][-1]))
    assert small < large


@pytest.mark.parametrize("sweep, message", [
    ({"shards": 0}, "'study_a.sweep.shards': 0 is not a positive integer"),
    ({"shards": "2"}, "'study_a.sweep.shards': '2' is not a positive integer"),
    ({"shards": True}, "'study_a.sweep.shards': True is not a positive integer"),
    ({"shards": 3, "resolutions": [32, 256]}, "'study_a.sweep.shards': 3 shards for 2 resolutions"),
    ({"shards": 2, "protocol": {"mode": "serial"}}, "'study_a.sweep.shards': 2 shards need "
                                                      "study_a.sweep.protocol.mode interleaved"),
])
def test_a_bad_shard_count_is_refused_naming_its_key(sweep, message):
    with pytest.raises(SweepConfigError, match=message):
        sweep_shards.of_config(_config(**sweep))


def test_a_shards_walk_asks_only_for_its_cells_by_the_grids_indices(fake):  # noqa: F811
    cells = walk([1, 2], [8, 16], ["float32-pageable"])
    shard = [c for c in cells if c.resolution == 16]
    records = conduct(["a", "b"], fake.command_for(), shard, _settings(resolutions=(8, 16)),
                      _protocol(blocks=1, profile_calls=0),
                      Store(None, ["a", "b"], len(cells)))
    asked = [line for line in fake.log.read_text().splitlines() if " cell " in line]
    assert asked == ["a cell 2", "b cell 2", "a cell 3", "b cell 3"]
    assert [(r["implementation"], r["cell"]) for r in records] == [("a", 2), ("b", 2), ("a", 3), ("b", 3)]


def _job(config, inputs, tmp: Path, shard: int | None) -> SimpleNamespace:
    job = interleaved_job(config, inputs, "fp32", tmp)
    if shard is not None:
        job.wildcards = SimpleNamespace(numerics="fp32", shard=str(shard))
    return job


def test_the_shards_tables_concatenate_to_the_unsharded_jobs_rows_with_the_oom_skip_rule(tmp_path, monkeypatch):
    """eager (Python worker) and libtorch (ac_libtorch --serve) on the CPU, an injected oom at cell 1 (batch 1,
    8 px, uint8-pinned: batch 2 there is skipped) and at cell 5 (batch 1, 16 px, uint8-pinned, in the other
    shard): two shards give the same rows (cell, status, message), schema and block counts as one job, each shard
    its own run_id and environment row naming its shard."""
    from abstraction_cost.models import resnet, weights_file
    config = config_module.load(REPO / "config/smoke.yaml")
    config["study_a"]["sweep"].update(implementations=["eager", "libtorch"], batches=[1, 2], resolutions=[8, 16],
                                      repeats=1, warmup=0,
                                      protocol={"invocations": 1, "max_invocations": 1, "blocks": 2, "block_ms": 1,
                                                "warmup_max": 0})
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    inputs = SimpleNamespace(inputs=str(make_pool(tmp_path)), weights=str(weights),
                             program_libtorch=str(native.ensure_built("libtorch")))
    monkeypatch.setenv("AC_FAULT", "cell:oom@1,cell:oom@5")
    whole = _job(config, inputs, tmp_path / "whole", None)
    (tmp_path / "whole").mkdir()
    sweep_interleaved.run(whole)
    config["study_a"]["sweep"]["shards"] = 2
    parts = []
    for shard in (0, 1):
        (tmp_path / f"shard{shard}").mkdir()
        parts.append(_job(config, inputs, tmp_path / f"shard{shard}", shard))
        sweep_interleaved.run(parts[-1])
    keys = ["implementation", "cell", "status", "message"]
    one = tables.read("sweep", whole.output.table)
    split = [tables.read("sweep", p.output.table) for p in parts]
    assert [sorted(set(s["resolution"])) for s in split] == [[8], [16]] or [
        sorted(set(s["resolution"])) for s in split] == [[16], [8]]
    both = pl.concat(split)
    assert both.schema == one.schema and both.height == one.height == 16
    assert both.select(keys).sort("implementation", "cell").equals(one.select(keys).sort("implementation", "cell"))
    skipped = both.filter(pl.col("message").str.starts_with("skipped:").fill_null(False))
    assert sorted(skipped["cell"].to_list()) == [3, 3, 7, 7]   # batch 2 after batch 1's oom, in each shard
    assert both["run_id"].n_unique() == 2
    envs = [tables.read("environment", p.output.env) for p in parts]
    assert [e["job"].to_list() for e in envs] == [["numerics=fp32,shard=0"], ["numerics=fp32,shard=1"]]
    blocks_one = tables.read("sweep_blocks", whole.output.blocks)
    blocks_split = pl.concat([tables.read("sweep_blocks", p.output.blocks) for p in parts])
    assert blocks_split.height == blocks_one.height > 0


def test_the_rule_makes_one_timing_job_per_numerics_and_shard(tmp_path):
    config = config_module.load(REPO / "config/gpu-smoke.yaml")
    import yaml
    config["study_a"]["sweep"].update(shards=2, numerics=["fp32", "tf32"])
    path = tmp_path / "sharded.yaml"
    path.write_text(yaml.safe_dump(config))
    done = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path / "w"),
                           "--configfile", str(path), "--cores", "2", "results/study_a/sweep.parquet", "-n",
                           "--quiet", "rules"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = dict(line.split()[:2] for line in done.stdout.splitlines() if len(line.split()) == 2)
    assert counts.get("sweep") == "4" and counts.get("concat_sweep") == "1", done.stdout
