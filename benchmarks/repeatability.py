"""Do the pipeline's numbers reproduce? Runs a config's measuring rules in separate Snakemake runs (fresh
processes each), then sets each cell's median of the last run against the first's.

    python benchmarks/repeatability.py --configfile config/gpu-smoke.yaml --tables sweep backend_comparison \
        --out benchmarks/results/<date>_<gpu>_repeatability_gpu_smoke.json
    python benchmarks/repeatability.py --from-runs runs/1 runs/2 --tables sweep --out result.json
    python benchmarks/repeatability.py --from-runs runs/1 --tables sweep --out result.json   # one run's own
    python benchmarks/repeatability.py --configfile config/gpu-smoke.yaml benchmarks/overlays/sweep_python.yaml \
        --overlay benchmarks/overlays/prepare_together_off.yaml --runs 4 --tables sweep --out result.json
                                          # does a key change the numbers? base, overlay, overlay, base

The first run measures whatever is not yet measured (and builds what the tables need); every later run forces
the tables' measuring rules again. Per table and cell the result holds the ratio run k / run 1 of the medians,
whether run k's median lies inside run 1's 95% interval (coverage), and per table the share of ok cells within
±10% and the largest deviation. Tables are copied out after each run (runs/<k>/), with the tables made from the
same measurements (the sweep's turns and speedups, which need its interleaved protocol; Study B's speedups and
each step's eager baseline), so that each can be read again; --from-runs compares such folders without running
anything.

With --overlay the runs alternate between the config alone (base) and the config under the overlay, in the order
base, overlay, overlay, base, base, ... (so that a drift of the host in time falls on both alike), and the result's
`conditions` sets each setting's runs against its own first (how far a setting agrees with itself) and each overlay
run against the base run next to it in time (how far the two settings differ): a key changes the numbers only where
the second is wider than the first. --from-runs takes the same with --conditions naming each folder's setting.

With --cold every run starts from cold compile caches, to weigh what a key costs in time, not only whether it
changes the numbers: its Snakemake gets Inductor's and Triton's caches in fresh folders of its own (runs/<k>/caches/),
the workflow's own compile caches (WORKFLOW_CACHES: the sweep's and Study B's warm-ups') are removed before it, and
every run but a fresh first one forces the tables' warm-ups (the rules that fill those caches) beside their measuring
rules. Each run's record has `rules_s`, per rule the summed wall seconds of its jobs, read from that run's Snakemake
output as run_time.py reads a log:

    python benchmarks/repeatability.py --configfile config/gpu-smoke.yaml \
        --overlay benchmarks/overlays/sweep_compile_warm_up_off.yaml --runs 4 --cold --tables sweep --workdir /tmp/ab \
        --out result.json                # what the sweep's compile warm-up costs and saves, from cold caches
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from abstraction_cost.study_b.blocks.registry import experiment

sys.path.insert(0, str(Path(__file__).resolve().parent))   # run_time.py beside it, also where loaded by its path
from run_time import jobs_of, summary  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# --cold: the compile warm-ups build into caches of the workflow's own (SWEEP_CACHE_DIR, STUDY_B_CACHE_DIR in
# workflow/rules/common.smk), which TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR do not reach, and their manifests
# tell Snakemake a warm-up is done: all removed before each run
WORKFLOW_CACHES = ("results/study_a/sweep/compile-cache", "results/study_a/sweep/compile-cache-manifests",
                   "results/study_b/compile-cache", "results/study_b/compile-cache-manifests")


@dataclass(frozen=True)
class Measured:
    path: str               # under the working directory
    keys: tuple[str, ...]   # what makes a cell
    value: str              # the median compared
    rules: tuple[str, ...]  # the rules that measure it (forced again in each later run)
    extras: tuple[str, ...] = ()  # tables made from the same measurements, built and copied beside it
    also: tuple[str, ...] = ()    # other per-cell medians of the table, whose spread over the runs is given too
    warm_ups: tuple[str, ...] = ()  # the rules that fill its compile caches (forced again with --cold)


def block_table(name: str) -> Measured:
    """Study B's building blocks: a case's speedup (with its bootstrap interval), and its eager and compiled medians
    beside it; the case timings and their environment rows copied along."""
    blocks = "results/study_b/blocks"
    return Measured(f"{blocks}/{name}.speedups.parquet", (*experiment(name).keys, "pair", "mode"), "speedup",
                    ("study_b_block_timing",), (f"{blocks}/{name}.parquet", f"{blocks}/{name}.env.parquet"),
                    ("eager_median_ms", "compiled_median_ms"), warm_ups=("compile_cache_blocks",))


MEASURED = {
    "sweep": Measured("results/study_a/sweep.parquet", ("numerics", "implementation", "cell"), "time_ms", ("sweep",),
                      ("results/study_a/sweep_blocks.parquet", "results/study_a/sweep_speedups.parquet",
                       "results/study_a/sweep.env.parquet"), warm_ups=("compile_cache_sweep",)),
    "backend_comparison": Measured("results/study_a/backend_comparison.parquet",
                                   ("numerics", "implementation", "batch_size", "resolution"), "time_per_sample_ms",
                                   ("eval_backend",)),
    # Study B end to end: each variant's median over invocations and its interval (the speedups table's times)
    "vision_e2e": Measured("results/study_b/models/vision_speedups.parquet",
                           ("model", "pair", "mode", "batch_size", "numerics", "memory_format", "variant"), "time_ms",
                           ("vision_model",),
                           # the calls, and each step's eager baseline (the issue's ±5%)
                           ("results/study_b/models/vision_e2e.parquet",
                            "results/study_b/models/vision_eager_baselines.parquet",
                            "results/study_b/models/vision_selective_summary.parquet",
                            "results/study_b/models/vision_e2e.env.parquet"), warm_ups=("compile_cache_model",)),
    # the blocks' batch-1 cases are host-bound and timed within milliseconds: their medians moved up to 2.5x
    **{f"blocks_{name}": block_table(name) for name in ("matmul", "conv_ablation", "conv_blocks")},
}


def cells(df: pl.DataFrame, m: Measured) -> pl.DataFrame:
    """(keys, median, low, high) per cell of a table's ok rows; low and high null where the table has none."""
    ok = df.filter(pl.col("status") == "ok")
    if f"{m.value}_low" in df.columns:
        return ok.select(*m.keys, median=pl.col(m.value), low=pl.col(f"{m.value}_low"),
                         high=pl.col(f"{m.value}_high"))
    return ok.group_by(list(m.keys)).agg(median=pl.col(m.value).median(), low=pl.lit(None, pl.Float64),
                                         high=pl.lit(None, pl.Float64))


def compare(first: pl.DataFrame, later: pl.DataFrame, m: Measured, tolerance: float = 0.10) -> dict:
    """The later run's cells against the first's: ratios, coverage, and the summary the issue's targets read."""
    a, b = cells(first, m), cells(later, m)
    joined = a.join(b, on=list(m.keys), suffix="_later").with_columns(
        ratio=pl.col("median_later") / pl.col("median"),
        covered=(pl.col("median_later") >= pl.col("low")) & (pl.col("median_later") <= pl.col("high")))
    n = joined.height
    deviation = (joined["ratio"] - 1).abs() if n else pl.Series([], dtype=pl.Float64)
    worst = joined.with_columns(dev=(pl.col("ratio") - 1).abs()).sort("dev", descending=True).head(5)
    return {
        "cells": n,
        "within_10pct": float((deviation <= tolerance).mean()) if n else None,
        "max_deviation": float(deviation.max()) if n else None,
        "coverage": float(joined["covered"].drop_nulls().mean()) if joined["covered"].drop_nulls().len() else None,
        "worst": worst.select(*m.keys, "median", "median_later", "ratio").to_dicts(),
        "ratios": joined.select(*m.keys, "median", "low", "high", "median_later", "ratio", "covered").to_dicts(),
    }


def snakemake(workdir: Path, configfiles: list[str], targets: list[str], forcerun: list[str], cores: str,
              extra: tuple[str, ...] = (), env: dict[str, str] | None = None) -> tuple[float, str]:
    """One Snakemake run (in `env`, else this process's environment): its wall seconds and its output."""
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
               "--configfile", *(str(Path(c).resolve()) for c in configfiles), "--cores", cores, *targets, *extra]
    if forcerun:
        command += ["--forcerun", *forcerun]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    output = result.stdout + result.stderr
    (workdir / "repeatability.snakemake.log").open("a").write(output)
    if result.returncode != 0:
        raise SystemExit(f"snakemake failed (rc {result.returncode}); its output: "
                         f"{workdir / 'repeatability.snakemake.log'}\n{output[-3000:]}")
    return time.perf_counter() - started, output


def run_and_save(workdir: Path, configfiles: list[str], chosen: dict, forced: list[str], cores: str, saved: Path,
                 extra: tuple[str, ...] = (), env: dict[str, str] | None = None) -> tuple[float, str]:
    """One Snakemake run of the chosen tables' targets and their extras, its wall seconds and output; the tables
    copied to `saved`."""
    targets = [path for m in chosen.values() for path in (m.path, *m.extras)]
    wall, output = snakemake(workdir, configfiles, targets, forced, cores, extra, env)
    saved.mkdir(parents=True, exist_ok=True)
    for m in chosen.values():
        for path in (m.path, *m.extras):
            shutil.copy(workdir / path, saved / Path(path).name)
    return wall, output


def cold_start(workdir: Path, saved: Path) -> dict[str, str]:
    """Before a run from cold compile caches: the workflow's own removed (WORKFLOW_CACHES), and the environment
    for its Snakemake, with Inductor's and Triton's caches in fresh folders under the run's `saved` folder, so that
    the user's own caches are neither read nor removed."""
    for path in WORKFLOW_CACHES:
        if (workdir / path).exists():
            shutil.rmtree(workdir / path)
    caches = saved / "caches"
    if caches.exists():   # this run's folder from an earlier call in the same working directory
        shutil.rmtree(caches)
    env = dict(os.environ)
    for name, folder in (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton")):
        (caches / folder).mkdir(parents=True)
        env[name] = str(caches / folder)
    return env


def rules_seconds(output: str) -> dict[str, float]:
    """Per rule, the summed wall seconds of the jobs in one run's Snakemake output (run_time.py's reading of a
    log), the longest first."""
    return {r["rule"]: r["job_s"] for r in summary(jobs_of(output.splitlines()))["rules"]}


def variance_components(blocks: pl.DataFrame) -> dict:
    """How much an interleaved sweep's times vary at each level, per (numerics, implementation, cell): between
    invocations (the coefficient of variation of the invocations' medians) and between turns within an
    invocation (the turns' medians' CV, averaged over invocations); summarised by their medians over cells."""
    keys = ["numerics", "implementation", "cell"]
    per_invocation = blocks.group_by(*keys, "invocation").agg(
        median=pl.col("time_ms").median(), turn_cv=pl.col("time_ms").std() / pl.col("time_ms").mean(),
        turns=pl.len(), calls=pl.col("calls").sum())
    per_cell = per_invocation.group_by(keys).agg(
        between_invocations_cv=pl.col("median").std() / pl.col("median").mean(),
        within_invocation_turn_cv=pl.col("turn_cv").mean(), invocations=pl.len(),
        turns_per_invocation=pl.col("turns").mean(), calls_per_invocation=pl.col("calls").mean()).sort(keys)
    return {"cells": per_cell.height,
            "between_invocations_cv_median": per_cell["between_invocations_cv"].median(),
            "within_invocation_turn_cv_median": per_cell["within_invocation_turn_cv"].median(),
            "by_cell": per_cell.to_dicts()}


def turns_against_probes(blocks: pl.DataFrame) -> dict | None:
    """Do slow turns follow slow probes? Per (numerics, implementation, cell), the rank correlation of each turn's
    time with its CPU's probe just before it (sweep_blocks' host_op_us); summarised by the median over cells. None
    where the turns were not probed (no timing slot, or a run before the column)."""
    if "host_op_us" not in blocks.columns:
        return None
    probed = blocks.drop_nulls("host_op_us")
    if probed.is_empty():
        return None
    keys = ["numerics", "implementation", "cell"]
    per_cell = probed.group_by(keys).agg(
        spearman=pl.corr("time_ms", "host_op_us", method="spearman"), turns=pl.len(),
        probe_us_median=pl.col("host_op_us").median(), probe_us_max=pl.col("host_op_us").max()).sort(keys)
    return {"cells": per_cell.height, "spearman_median": per_cell["spearman"].median(),
            "by_cell": per_cell.to_dicts()}


def environment(run: Path) -> dict:
    """The first run's device, versions and date, from its sweep's, vision jobs' or blocks' environment rows where
    it has them."""
    candidates = (run / "sweep.env.parquet", run / "vision_e2e.env.parquet", *sorted(run.glob("*.env.parquet")))
    path = next((p for p in candidates if p.exists()), None)
    if path is None:
        return {}
    env = pl.read_parquet(path).row(0, named=True)
    return {"device": env["gpu_name"] or env["device"], "date": env["started_at"][:10],
            **{k: env[k] for k in ("torch_version", "cudnn_version", "driver_version", "git_revision")}}


def host_speed(run: Path) -> dict:
    """The host's speed in the run's sweep jobs (measure/host_speed.py: µs per dispatched op, GB/s of a pageable
    copy; medians over the jobs' starts and ends; turn_host_op_us, over the picked CPUs' probes before the turns),
    where its environment rows have them: a run on a slower host is slower in the host-bound cells alone."""
    path = run / "sweep.env.parquet"
    env = pl.read_parquet(path) if path.exists() else None
    if env is None or "host_op_us_start" not in env.columns:
        return {}
    both = lambda name: pl.concat([env[f"{name}_start"], env[f"{name}_end"]]).median()  # noqa: E731
    turns = env["turn_host_op_us"].median() if "turn_host_op_us" in env.columns else None
    return {"host_op_us": both("host_op_us"), "host_copy_gbps": both("host_copy_gbps"), "turn_host_op_us": turns}


def worker_times(run: Path) -> dict:
    """What the run's sweep jobs spent starting their workers and loading what they time (seconds, summed over the
    jobs' environment rows), where the rows have it: a protocol key may change these while the cells stay alike."""
    path = run / "sweep.env.parquet"
    env = pl.read_parquet(path) if path.exists() else None
    if env is None or "worker_load_s" not in env.columns:
        return {}
    return {name: env[name].sum() for name in ("worker_start_s", "worker_load_s")}


def spread(dirs: list[Path], m: Measured) -> dict:
    """Per column (the value, then `also`): each cell's largest median over all the runs divided by its smallest,
    the largest and the median of these over the cells, and the cell with the largest. `also` columns are read from
    the table's ok rows as they are (a table of one row per cell)."""
    runs = [pl.read_parquet(d / Path(m.path).name) for d in dirs]

    def medians(table: pl.DataFrame, column: str) -> pl.DataFrame:
        if column == m.value:   # as compare() reads it
            return cells(table, m).select(*m.keys, "median")
        return table.filter(pl.col("status") == "ok").select(*m.keys, median=pl.col(column))

    out = {}
    for column in (m.value, *m.also):
        # ordered, so that of cells as wide the first listed is the widest, the same on every reading
        per_cell = pl.concat([medians(t, column) for t in runs]).group_by(list(m.keys), maintain_order=True).agg(
            spread=pl.col("median").max() / pl.col("median").min(), runs=pl.len()).sort(
            "spread", descending=True, maintain_order=True)
        out[column] = {"cells": per_cell.height, "max": per_cell["spread"].max(),
                       "median": per_cell["spread"].median(),
                       "widest": per_cell.head(1).to_dicts()[0] if per_cell.height else None}
    return out


def compare_runs(dirs: list[Path], chosen: dict) -> dict:
    """Every later run's tables against the first's."""
    out = {}
    for name, m in chosen.items():
        table = Path(m.path).name
        first = pl.read_parquet(dirs[0] / table)
        out[name] = {f"run{k + 1}_vs_run1": compare(first, pl.read_parquet(d / table), m)
                     for k, d in enumerate(dirs) if k > 0}
    return out


def alternating(runs: int) -> list[str]:
    """Each run's setting with an overlay: base, overlay, overlay, base, base, overlay, ..."""
    return ["base" if (k + 1) // 2 % 2 == 0 else "overlay" for k in range(runs)]


def summarised(comparison: dict) -> dict:
    """A comparison without its per-cell ratios, with the geometric mean of its ratios (a shift of every cell)."""
    ratios = [r["ratio"] for r in comparison["ratios"] if r["ratio"]]
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None
    return {**{k: v for k, v in comparison.items() if k != "ratios"}, "ratio_geomean": geomean}


def compare_conditions(dirs: list[Path], conditions: list[str], chosen: dict) -> dict:
    """Per table: each setting's later runs against its first (`within`), each run of a setting other than the
    first run's against the nearest run of the first run's setting (`across`; the earlier one where two are as
    near), each `summarised`, and each setting's `spread` over its own runs."""
    base = conditions[0]
    out = {}
    for name, m in chosen.items():
        table = lambda k: pl.read_parquet(dirs[k] / Path(m.path).name)  # noqa: E731
        within, across, spreads = {}, {}, {}
        for label in dict.fromkeys(conditions):
            ks = [k for k, c in enumerate(conditions) if c == label]
            for k in ks[1:]:
                within[f"{label}: run{k + 1}_vs_run{ks[0] + 1}"] = summarised(compare(table(ks[0]), table(k), m))
            spreads[label] = spread([dirs[k] for k in ks], m)
        for k, label in enumerate(conditions):
            if label != base:
                near = min((j for j, c in enumerate(conditions) if c == base), key=lambda j: (abs(j - k), j))
                across[f"{label} run{k + 1}_vs_{base} run{near + 1}"] = summarised(compare(table(near), table(k), m))
        out[name] = {"within": within, "across": across, "spread": spreads}
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configfile", nargs="+", help="the config whose measuring rules run, and any overlays of it "
                   "(not with --from-runs)")
    p.add_argument("--overlay", help="a config overlay: the runs alternate between the config alone and under it")
    p.add_argument("--tables", nargs="+", default=["sweep"], choices=sorted(MEASURED))
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--from-runs", nargs="+", type=Path,
                   help="compare these saved runs instead of running (one: its variance and probes alone)")
    p.add_argument("--conditions", nargs="+", help="with --from-runs: each folder's setting (e.g. base overlay "
                   "overlay base), compared as --overlay's runs are")
    p.add_argument("--cold", action="store_true", help="every run from cold compile caches (fresh Inductor and "
                   "Triton caches of its own, the workflow's removed), its warm-ups forced too")
    p.add_argument("--workdir", default=".", help="the pipeline's working directory (default: here)")
    p.add_argument("--cores", default="all")
    p.add_argument("--out", required=True, help="the result, JSON")
    args = p.parse_args(argv)
    chosen = {name: MEASURED[name] for name in args.tables}
    runs = []
    conditions = args.conditions
    if args.from_runs:
        dirs = args.from_runs   # one run gives its own variance, probes and host speed, and nothing to compare
        if conditions is not None and len(conditions) != len(dirs):
            p.error(f"--conditions names {len(conditions)} settings for {len(dirs)} folders of --from-runs")
        if args.cold:
            p.error("--cold is for runs made here; --from-runs runs nothing")
    else:
        if conditions is not None:
            p.error("--conditions is for --from-runs; runs made here take theirs from --overlay")
        conditions = alternating(args.runs) if args.overlay else None
        if args.configfile is None or args.runs < 2:
            p.error("need --configfile and --runs of at least 2 (or --from-runs)")
        workdir = Path(args.workdir).resolve()
        forced = sorted({rule for m in chosen.values() for rule in (*m.rules, *(m.warm_ups if args.cold else ()))})
        dirs = [workdir / "runs" / str(k + 1) for k in range(args.runs)]
        for k, saved in enumerate(dirs):
            fresh = k == 0 and not all((workdir / m.path).exists() for m in chosen.values())
            under = conditions and conditions[k] == "overlay"
            env = cold_start(workdir, saved) if args.cold else None
            wall, output = run_and_save(workdir, [*args.configfile, *([args.overlay] if under else [])], chosen,
                                        [] if fresh else forced, args.cores, saved, env=env)
            rules_s = rules_seconds(output)
            runs.append({"run": k + 1, "wall_s": wall, "forced": [] if fresh else forced, "rules_s": rules_s,
                         **({"condition": conditions[k]} if conditions else {})})
            spent = ", ".join(f"{rule} {s:.0f} s" for rule, s in rules_s.items())
            print(f"run {k + 1}{f' ({conditions[k]})' if conditions else ''}: {wall:.0f} s"
                  f"{f'; {spent}' if spent else ''}", flush=True)
    turns = {str(d): pl.read_parquet(d / "sweep_blocks.parquet") for d in dirs
             if (d / "sweep_blocks.parquet").exists()}
    result = {"config": args.configfile, "overlay": args.overlay, **environment(dirs[0]), "runs": runs,
              "dirs": [str(d) for d in dirs], "tables": compare_runs(dirs, chosen),
              "spread": {name: spread(dirs, m) for name, m in chosen.items()},
              **({"conditions": {"of_runs": conditions, **compare_conditions(dirs, conditions, chosen)}}
                 if conditions else {}),
              "variance_components": {d: variance_components(blocks) for d, blocks in turns.items()},
              "turns_against_probes": {d: turns_against_probes(blocks) for d, blocks in turns.items()},
              "host_speed": {str(d): host_speed(d) for d in dirs},
              "worker_times": {str(d): worker_times(d) for d in dirs}}
    for name in chosen:
        for key, summary in result["tables"][name].items():
            print(f"{name} {key}: {summary['cells']} cells, {summary['within_10pct']} within ±10%, max deviation "
                  f"{summary['max_deviation']}, coverage {summary['coverage']}")
        for column, s in result["spread"][name].items():
            print(f"{name} {column}: largest/smallest median over the runs up to {s['max']}, median {s['median']}")
        for part in ("within", "across") if conditions else ():
            for key, s in result["conditions"][name][part].items():
                print(f"{name} {part} {key}: {s['cells']} cells, max deviation {s['max_deviation']}, geometric mean "
                      f"of the ratios {s['ratio_geomean']}, coverage {s['coverage']}")
        for label, columns in result["conditions"][name]["spread"].items() if conditions else ():
            for column, s in columns.items():
                print(f"{name} {column} ({label} runs): largest/smallest median up to {s['max']}, median {s['median']}")
    first = result["host_speed"][str(dirs[0])]
    for k, d in enumerate(dirs[1:], start=2):
        later = result["host_speed"][str(d)]
        if first.get("host_op_us") and later.get("host_op_us"):
            print(f"host run{k} / run1: {later['host_op_us'] / first['host_op_us']:.2f}× the time per dispatched op, "
                  f"{later['host_copy_gbps'] / first['host_copy_gbps']:.2f}× the pageable copy bandwidth"
                  + (f", {later['turn_host_op_us'] / first['turn_host_op_us']:.2f}× in the turns"
                     if first.get("turn_host_op_us") and later.get("turn_host_op_us") else ""))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1, default=str))
    return result


if __name__ == "__main__":
    main()
