"""Eager drift within one vision job: is the eager model as fast in the job's later steps as in its first?

A vision job's eager model can be slower in the job's later steps than in its first, which would bias every
speedup taken against it. This benchmark walks one process through what a job does between those steps and times
the same eager model at each checkpoint, with two protocols:

- `plain`: rounds of timed calls with Python's garbage collector running and no untimed call before a turn;
- `hygienic`: the harness's protocol (study_b/blocks/interleaved.py): the collector paused during the rounds
  (measure.timing.gc_paused) and one untimed call at the start of every turn.

Checkpoints, in job order: `fresh` (model loaded), `whole_compiled` (the whole model compiled), `units_compiled`
(every block compiled alone, the compiled code the layer and selective steps keep), `chain` (the eager model
called block by block, as the layer step's all-eager prefix is), `among_variants` (eager interleaved with the
compiled blocks' chain, as in the selective step), `after_profiler` (after a torch.profiler window: CUPTI's
residue). With each: the allocator's state, the GC's tracked objects, and the SM clock (NVML) — the suspected
causes. `ratio_to_fresh` > 1 at a checkpoint is drift that the protocol lets into the numbers.

    python benchmarks/eager_drift.py --model mobilenet_v2 --batch 1 --out drift.json      # on a GPU

Measured runs and what they showed: docs/results/*-eager-drift.md.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
from contextlib import nullcontext

import torch

from abstraction_cost.measure import device as devices
from abstraction_cost.measure.nvml import NvmlReader
from abstraction_cost.measure.timing import benchmark, gc_paused
from abstraction_cost.study_b import configurations as cfgs
from abstraction_cost.study_b.models import vision as vm
from abstraction_cost.study_b.models.layers import chain

PROTOCOLS = ("plain", "hygienic")


def timed_rounds(fns: list, inputs, device, rounds: int, repeats: int, protocol: str) -> list[list[float]]:
    """Interleaved rounds of every fn in `fns`; per fn its times (ms) under `protocol`."""
    out = [[] for _ in fns]
    with gc_paused() if protocol == "hygienic" else nullcontext():
        for r in range(rounds):
            for i in (range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))):
                if protocol == "hygienic":
                    fns[i](*inputs[-1])
                out[i] += benchmark(fns[i], inputs, device=device, warmup=0, repeats=repeats)
    return out


def state(device, reader) -> dict:
    mem = torch.cuda.memory_stats(device) if device.type == "cuda" else {}
    clocks = {}
    if reader is not None:
        try:
            clocks = reader.state()
        except Exception:   # NVML without clocks on this GPU: the other columns still say something
            clocks = {}
    return {"gc_objects": len(gc.get_objects()), "gc_counts": list(gc.get_count()),
            "allocated_mib": mem.get("allocated_bytes.all.current", 0) / 2**20,
            "reserved_mib": mem.get("reserved_bytes.all.current", 0) / 2**20,
            "allocation_segments": mem.get("segment.all.current"),
            "sm_clock_mhz": clocks.get("sm_clock_mhz"), "temperature_c": clocks.get("temperature_c")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="mobilenet_v2")
    parser.add_argument("--pair", default="gpu", choices=sorted(cfgs.PAIRS))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=4, help="timed calls per turn")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (eager: no code generation)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    vm.BACKEND = args.backend
    case = vm.Case(model=args.model, pair=args.pair, mode="default", batch_size=args.batch,
                   resolution=args.resolution, seed=0, warmup=3, rounds=args.rounds, repeats_per_round=args.repeats,
                   inputs=2, flush_l2=False)
    devices.apply_numerics({"backend_flags": {"tf32": False, "cudnn_benchmark": False}})
    loaded = vm.load_case(case)
    device, model, inputs = loaded.device, loaded.model, loaded.inputs
    reader, _ = NvmlReader.open(devices.cuda_uuid(device))
    eager_chain = chain([b.module for b in loaded.parts])
    results = []

    def checkpoint(name: str, fns: dict) -> None:
        """Time eager (and whatever it is interleaved with here) under both protocols, alternating them."""
        for protocol in PROTOCOLS:
            times = timed_rounds(list(fns.values()), inputs, device, args.rounds, args.repeats, protocol)
            for (label, _), ts in zip(fns.items(), times):
                results.append({"checkpoint": name, "protocol": protocol, "timed": label,
                                "median_ms": statistics.median(ts), "min_ms": min(ts), "max_ms": max(ts),
                                "samples": len(ts), **state(device, reader)})

    with torch.no_grad():
        for x in inputs:                       # cuDNN and the allocator settle before anything is timed
            for _ in range(3):
                model(*x)
        checkpoint("fresh", {"eager": model})
        vm.prepare_whole(model, case, inputs[0], device)
        checkpoint("whole_compiled", {"eager": model})
        units = vm.compile_units(loaded, case)
        checkpoint("units_compiled", {"eager": model})
        checkpoint("chain", {"eager": model, "eager_chain": eager_chain})
        checkpoint("among_variants", {"eager": model, "all_blocks": chain(units)})
        activities = [torch.profiler.ProfilerActivity.CPU] + (
            [torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else [])
        with torch.profiler.profile(activities=activities):
            for x in inputs:
                model(*x)
        checkpoint("after_profiler", {"eager": model})

    fresh = {r["protocol"]: r["median_ms"] for r in results if r["checkpoint"] == "fresh"}
    for r in results:
        r["ratio_to_fresh"] = r["median_ms"] / fresh[r["protocol"]] if r["timed"] == "eager" else None
    summary = {"model": args.model, "pair": args.pair, "batch": args.batch, "resolution": args.resolution,
               "device": str(device), "torch": torch.__version__, "rounds": args.rounds, "repeats": args.repeats,
               "rows": results}
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    for r in results:
        print(f"{r['checkpoint']:16s} {r['protocol']:9s} {r['timed']:12s} median {r['median_ms']:.4f} ms"
              f" (x{r['ratio_to_fresh'] or float('nan'):.3f} fresh) gc objects {r['gc_objects']}"
              f" reserved {r['reserved_mib']:.0f} MiB SM {r['sm_clock_mhz']} MHz")


if __name__ == "__main__":
    main()
