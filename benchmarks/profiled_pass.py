"""Does the profiled pass move the timed medians? Runs one measuring rule four times in fresh Snakemake runs, in
the order profiled, unprofiled, unprofiled, profiled (ABBA, so that a drift over the runs hits both arms alike):
"profiled" with the protocol's profiled pass (`profile_calls` calls per cell after the timed turns), "unprofiled"
with none (`profile_calls: 0`).

    python benchmarks/profiled_pass.py --configfile config/gpu-smoke.yaml --table backend_comparison \
        --numerics fp32 bf16-autocast --workdir /tmp/ab --out benchmarks/results/<date>_<gpu>_profiled_pass.json

Per cell it sets the unprofiled arm's median (the geometric mean of its two runs) against the profiled arm's, and
sets that ratio against the cell's own precision: the half-width of the profiled runs' 95% intervals. The same is
done for each arm's two runs against each other (A/A), which is what run-to-run noise alone gives. The pass moves
no timed median beyond the protocol's interval where the A/B's share of cells within the half-width is no lower
than the A/A's, less one cell's worth, and the median ratio over cells has a bootstrap interval that holds 1 or
lies within the median half-width.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import numpy as np
import polars as pl
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from repeatability import MEASURED, cells, run_and_save  # noqa: E402

# per measured table: the config section whose protocol has the pass, and the rule that measures it
SECTIONS = {"backend_comparison": ("study_a", "backends"), "sweep": ("study_a", "sweep")}
ORDER = ("profiled", "unprofiled", "unprofiled", "profiled")
RESAMPLES = 2000


def arm_config(config: dict, table: str, profile_calls: int, numerics: list[str] | None) -> dict:
    """The config of one arm: the section's protocol with `profile_calls`, and its numerics narrowed if asked."""
    out = copy.deepcopy(config)
    section = out
    for key in SECTIONS[table]:
        section = section[key]
    section.setdefault("protocol", {})["profile_calls"] = profile_calls
    if numerics:
        unknown = sorted(set(numerics) - set(section["numerics"]))
        if unknown:
            raise SystemExit(f"--numerics: {unknown} not in {'.'.join(SECTIONS[table])}.numerics "
                             f"{section['numerics']}")
        section["numerics"] = list(numerics)
    return out


def half_width(low: str = "low", high: str = "high", median: str = "median") -> pl.Expr:
    """A cell's 95% interval's half-width relative to its median."""
    return (pl.col(high) - pl.col(low)) / 2 / pl.col(median)


def pair(first: pl.DataFrame, second: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Two runs' cells joined: the second's median over the first's, and the first's relative half-width."""
    return (first.with_columns(half_width=half_width())
            .join(second.select(*keys, pl.col("median").alias("median_2")), on=keys)
            .with_columns(ratio=pl.col("median_2") / pl.col("median")))


def within_share(frame: pl.DataFrame) -> float | None:
    """The share of cells whose ratio lies within their half-width of 1."""
    if frame.is_empty():
        return None
    return float(((frame["ratio"] - 1).abs() <= frame["half_width"]).mean())


def median_ratio_interval(ratios: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """The median of the cells' ratios and its percentile-bootstrap interval over cells."""
    rng = np.random.default_rng(seed)
    picks = ratios[rng.integers(0, ratios.size, size=(RESAMPLES, ratios.size))]
    stats = np.median(picks, axis=1)
    return float(np.median(ratios)), float(np.quantile(stats, 0.025)), float(np.quantile(stats, 0.975))


def effect(runs: dict[str, list[pl.DataFrame]], keys: list[str]) -> dict:
    """The A/B against the A/A: per cell the unprofiled arm's median over the profiled arm's (geometric means of
    each arm's runs), within the profiled runs' half-width or not; the same share for each arm's two runs."""
    def arm(frames: list[pl.DataFrame], name: str) -> pl.DataFrame:
        a, b = frames
        joined = a.join(b.select(*keys, pl.col("median").alias("m2"), pl.col("low").alias("l2"),
                                 pl.col("high").alias("h2")), on=keys)
        return joined.select(*keys, (pl.col("median") * pl.col("m2")).sqrt().alias(name),
                             ((half_width() + half_width("l2", "h2", "m2")) / 2).alias(f"{name}_half_width"))

    both = arm(runs["profiled"], "profiled").join(arm(runs["unprofiled"], "unprofiled").drop("unprofiled_half_width"),
                                                  on=keys)
    both = both.with_columns(ratio=pl.col("unprofiled") / pl.col("profiled"),
                             half_width=pl.col("profiled_half_width")).drop("profiled_half_width")
    a_a = {name: pair(*runs[name], keys) for name in ("profiled", "unprofiled")}
    a_a_share = [s for s in (within_share(f) for f in a_a.values()) if s is not None]
    ratio, low, high = median_ratio_interval(both["ratio"].to_numpy()) if both.height else (None, None, None)
    half = float(both["half_width"].median()) if both.height else None
    share = within_share(both)
    no_effect = (share is not None and a_a_share and share >= min(a_a_share) - 1 / both.height
                 and (low <= 1 <= high or abs(ratio - 1) <= half))
    return {
        "cells": both.height,
        "ab_within_half_width": share,
        "aa_within_half_width": {name: within_share(f) for name, f in a_a.items()},
        "median_ratio_unprofiled_over_profiled": ratio, "median_ratio_low": low, "median_ratio_high": high,
        "median_half_width": half,
        "verdict": ("no ok cell in both arms: nothing to compare" if not both.height else
                    "the profiled pass moves no timed median beyond the protocol's interval" if no_effect else
                    "the profiled pass moves timed medians beyond the protocol's interval"),
        "by_cell": both.sort("ratio").to_dicts(),
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configfile", required=True)
    p.add_argument("--table", choices=sorted(SECTIONS), default="backend_comparison")
    p.add_argument("--numerics", nargs="+", help="narrow the section's numerics (fewer jobs per run)")
    p.add_argument("--profile-calls", type=int, default=5, help="the profiled arm's calls per cell")
    p.add_argument("--workdir", default=".")
    p.add_argument("--cores", default="all")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.profile_calls < 1:
        p.error("--profile-calls: the profiled arm needs at least 1 call")
    workdir = Path(args.workdir).resolve()
    config = yaml.safe_load(Path(args.configfile).read_text())
    configs = {}
    for name, calls in (("profiled", args.profile_calls), ("unprofiled", 0)):
        configs[name] = workdir / "profiled_pass" / f"{name}.yaml"
        configs[name].parent.mkdir(parents=True, exist_ok=True)
        configs[name].write_text(yaml.safe_dump(arm_config(config, args.table, calls, args.numerics)))
    m = MEASURED[args.table]
    chosen = {args.table: m}
    frames: dict[str, list[pl.DataFrame]] = {"profiled": [], "unprofiled": []}
    runs = []
    for k, name in enumerate(ORDER):
        saved = workdir / "profiled_pass" / "runs" / f"{k + 1}-{name}"
        # the first run builds what the rule needs; the arms' configs differ in the protocol alone, so later runs
        # rerun the measuring rule (forced), never the builds (rerun on file times only)
        forced = [] if k == 0 and not (workdir / m.path).exists() else list(m.rules)
        wall, _ = run_and_save(workdir, [str(configs[name])], chosen, forced, args.cores, saved,
                               extra=("--rerun-triggers", "mtime"))
        frames[name].append(cells(pl.read_parquet(saved / Path(m.path).name), m))
        runs.append({"run": k + 1, "arm": name, "wall_s": wall, "forced": forced})
        print(f"run {k + 1} ({name}): {wall:.0f} s", flush=True)
    result = {"config": args.configfile, "table": args.table, "numerics": args.numerics,
              "profile_calls": args.profile_calls, "runs": runs, **effect(frames, list(m.keys))}
    print(f"{result['cells']} cells: A/B within the half-width {result['ab_within_half_width']}, A/A "
          f"{result['aa_within_half_width']}; median unprofiled / profiled "
          f"{result['median_ratio_unprofiled_over_profiled']} "
          f"[{result['median_ratio_low']}, {result['median_ratio_high']}], median half-width "
          f"{result['median_half_width']}: {result['verdict']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1, default=str))
    return result


if __name__ == "__main__":
    main()
