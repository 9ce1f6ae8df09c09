"""One Study B vision job in this process, without Snakemake (the GPU machine may have none), and the numbers
a reader checks first: every step's eager baseline, predicted against realised selective compilation, the
device-busy fractions and the output checks' verdicts.

    python benchmarks/one_vision_job.py --config config/gpu-smoke.yaml --pair gpu --out job.json \
        mobilenet_v2 squeezenet1_1
"""
from __future__ import annotations

import argparse
import json
import logging
import time

import polars as pl

from abstraction_cost import config as config_module
from abstraction_cost import tables
from abstraction_cost.measure.run import measured_run
from abstraction_cost.study_b.models import job as vision_job, summary as vision_summary

MEASURED = ("vision_e2e", "vision_layer_times", "vision_selective", "vision_timing_methods")


def summarise(out: dict, config: dict) -> dict:
    b = config["study_b"]["models"]["bootstrap"]
    args = (b["resamples"], b["confidence"], config["seed"])
    frames = {n: tables.frame(n, out[n]) for n in MEASURED}
    speedups = tables.frame("vision_speedups", vision_summary.speedup_rows(
        frames["vision_e2e"], *args, timing=frames["vision_timing_methods"]))
    selective = tables.frame("vision_selective_summary", vision_summary.selective_summary_rows(
        frames["vision_selective"], tables.frame("vision_oracles", out["vision_oracles"]), *args))
    baselines = tables.frame("vision_eager_baselines", vision_summary.eager_baseline_rows(frames, *args))
    statuses = pl.concat([frames[n].select(pl.lit(n).alias("table"), "status") for n in MEASURED])
    return {"speedups": speedups.to_dicts(), "selective": selective.to_dicts(), "eager_baselines": baselines.to_dicts(),
            "statuses": statuses.group_by("table", "status").len().sort("table").to_dicts()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--pair", default="gpu")
    parser.add_argument("--out", required=True)
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    config = config_module.load(args.config)
    result = {}
    for model in args.models:
        start = time.perf_counter()
        with measured_run(config, rule="one_vision_job", job={"model": model}, env_path=f"{args.out}.{model}.env"
                          ".parquet", device=vision_job.run_device(config, model, args.pair)) as run:
            out = vision_job.run_job(config, model, args.pair, run, logging.getLogger(model))
        result[model] = {"seconds": time.perf_counter() - start, **summarise(out, config)}
        with open(args.out, "w") as f:           # after every model: a later one's time-out keeps the earlier
            json.dump(result, f, indent=1, default=str)


if __name__ == "__main__":
    main()
