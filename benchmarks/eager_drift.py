"""Eager drift within one vision job: is the eager model as fast in the job's later steps as in its first?

On an H100 MobileNetV2's eager at batch 1 took 3.01 ms in a job's end-to-end step and 4.29 ms in its selective
step. This benchmark walks one process through what a job does between those steps and times the same eager
model at each checkpoint, with two protocols:

- `plain`: rounds of timed calls with Python's garbage collector running and no untimed call before a turn
  (the harness before this benchmark);
- `hygienic`: the harness now (compiler/interleaved.py): the collector paused during the rounds
  (measure.timing.gc_paused) and one untimed call at the start of every turn.

Checkpoints, in job order: `fresh` (model loaded), `whole_compiled` (the whole model compiled), `units_compiled`
(every block compiled alone, the compiled code the layer and selective steps keep), `chain` (the eager model
called block by block, as the layer step's all-eager prefix is), `among_variants` (eager interleaved with the
compiled blocks' chain, as in the selective step), `after_profiler` (after a torch.profiler window: CUPTI's
residue). With each: the allocator's state, the GC's tracked objects, and the SM clock (NVML) — the suspected
causes. `ratio_to_fresh` > 1 at a checkpoint is drift that the protocol lets into the numbers.

    python benchmarks/eager_drift.py --model mobilenet_v2 --batch 1 --out drift.json      # on a GPU

Measured on an H100 (torch 2.11, 2026-11-23, MobileNetV2 batch 1, 6 rounds x 4 calls, Inductor with its
default compile workers): eager 3.52 ms fresh (plain protocol), 5.78 ms after the whole model's compile, 5.87
after the blocks', 6.15 interleaved with the compiled blocks, 8.42 after one profiler window; the hygienic
protocol gave the same picture (5.49, 6.11, 5.97, 7.96 ms), so Python's collector is not the cause. The
drift comes with the first compile and, much more, after the profiler. Still open: whether the compile's
worker pool causes it (timing jobs compile with one thread, TORCHINDUCTOR_COMPILE_THREADS=1: run this with
that variable set to compare) or the host slowing down over the process's life.

Again on an H100 (2026-11-25, same settings; results/eager_drift_h100_2026-11-25_*.json), three processes: eager
fresh 5.65 / 4.87 ms (plain / hygienic) with TORCHINDUCTOR_COMPILE_THREADS=1, 5.70 / 5.78 with Inductor's default
workers, 8.04 / 5.87 with `--backend eager` (dynamo, no Inductor). After the profiler window: 8.03 / 8.19 ms
(x1.42 / x1.68) with one compile thread, 7.40 / 9.16 (x1.30 / x1.59) with the default workers, 7.12 / 6.36
(x0.89 / x1.08) without Inductor. So the compile's worker pool is not the cause: the drift after the profiler
comes with Inductor's compiled code in the process. At batch 1 the model is bound by kernel launches on the host,
and a checkpoint's two protocols differ by up to 37% (8.04 against 5.87 ms fresh): host noise of that size is
the floor any eager baseline at batch 1 has here.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
from contextlib import nullcontext

import torch

from abstraction_cost.compiler import configurations as cfgs
from abstraction_cost.compiler import vision_models as vm
from abstraction_cost.compiler.layers import chain
from abstraction_cost.measure import device as devices
from abstraction_cost.measure.nvml import NvmlReader
from abstraction_cost.measure.timing import benchmark, gc_paused

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
    devices.apply_numerics({"numerics": {"tf32": False, "cudnn_benchmark": False}})
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
