"""How long a Python worker takes to start, forked from the job's fork server (programs/fork_server.py: torch,
torchvision and dynamo imported once) against started directly (a fresh interpreter importing them itself).

Each round starts `--workers` Study B clean workers at once, as an invocation of the vision protocol does (eager
and its baselines of one case: the model built and its inputs made, then `up`), and times each from its start to
its `up`; the rounds alternate the two ways (ABAB...), so that a slow period of the host falls on both.

    python benchmarks/worker_startup.py [--configfile config/gpu-smoke.yaml] [--model NAME] \
        [--workers 2] [--rounds 6] --out benchmarks/results/<date>_<gpu>_worker_startup.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from abstraction_cost import config as config_module
from abstraction_cost.programs import fork_server
from abstraction_cost.programs.workers import Worker
from abstraction_cost.study_b.models import protocol, vision

REPO = Path(__file__).resolve().parents[1]


def spec_of(config: dict, model: str | None) -> dict:
    """The clean worker's spec of the config's first setting, on the GPU pair where there is a GPU."""
    import torch
    section = config["study_b"]["models"]
    pair = "gpu" if section["models"].get("gpu") and torch.cuda.is_available() else "cpu"
    model = model or section["models"][pair][0]
    setting = vision.settings(config, pair)[0]
    case = vision.case_from_config(config, model, pair, section["layer_mode"], setting)
    return protocol._spec(config, case, protocol.CLEAN, None, protocol.Protocol.from_config(section))


def round_of(spec: dict, workers: int, directory: Path, forked: bool) -> list[float]:
    """Seconds from each worker's start to its `up`, `workers` started at once."""
    os.environ[fork_server.DISABLE_ENV] = "1" if forked else "0"
    started = time.perf_counter()
    pool = [Worker(f"w{i}", protocol._command({**spec, "invocation": 0}, directory, f"w{i}"))
            for i in range(workers)]
    up = []
    for worker in pool:
        worker.ask(None, "up")
        up.append(time.perf_counter() - started)
    for worker in pool:
        worker.close()
    return up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configfile", default=str(REPO / "config/gpu-smoke.yaml"))
    parser.add_argument("--model", help="default: the first of the pair's models")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    config = config_module.load(args.configfile)
    spec = spec_of(config, args.model)
    times: dict[str, list[float]] = {"forked": [], "direct": []}
    with tempfile.TemporaryDirectory() as tmp:
        # the server's own start (its imports) is paid once per job, by its first workers: not in a round
        preload = max(round_of(spec, 1, Path(tmp), True))
        print(f"the fork server's start and a first worker: {preload:.2f} s", flush=True)
        for r in range(args.rounds):
            way = ("forked", "direct")[r % 2]
            times[way] += round_of(spec, args.workers, Path(tmp), way == "forked")
            print(f"round {r} {way}: {', '.join(f'{t:.2f}' for t in times[way][-args.workers:])} s", flush=True)
    summary = {way: {"median_s": statistics.median(t), "min_s": min(t), "max_s": max(t), "n": len(t)}
               for way, t in times.items()}
    summary["saved_s"] = summary["direct"]["median_s"] - summary["forked"]["median_s"]
    out = {"config": args.configfile, "model": spec["case"]["model"], "workers": args.workers, "rounds": args.rounds,
           "device": spec["case"]["pair"], "preloaded": list(fork_server.PRELOAD), "first_worker_s": preload,
           "times_s": times,
           "summary": summary}
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
