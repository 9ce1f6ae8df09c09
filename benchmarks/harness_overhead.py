"""Harness overhead: eager ResNet-50 training steps timed by the harness against a bare loop.

Both sides run the same work in the same process, on the same model and data: gather a batch of uint8 images
on the host, copy it to the device, normalise, forward, cross-entropy, backward, SGD step.
- harness: backends.eager.train_epoch inside a measured phase (per-step CUDA event pairs, the NVML sampler
  thread running, loss/accuracy accumulated on the device), i.e. exactly what the training rule runs;
- bare: the same steps with one CUDA event pair around the whole loop, nothing else.
Rounds alternate harness and bare so that clock and temperature drift hit both alike. The overhead is the
median harness wall time per step over the median bare time per step, minus one; the harness's own reported
time (sum of its step events) is compared too.

    python benchmarks/harness_overhead.py --batch 128 --resolution 224 --steps 40 --rounds 7 --out overhead.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

from abstraction_cost.config import TrainingSettings
from abstraction_cost.data.prepared import Split
from abstraction_cost.measure import device as devices
from abstraction_cost.measure.nvml import NvmlReader, NvmlSampler
from abstraction_cost.measure.run import Run
from abstraction_cost.measure.timing import StepTimer, synchronize
from abstraction_cost.models import init, resnet
from abstraction_cost.study_a import eager


def bare_loop(model, optimizer, split, indices, batch_size, normalise, device) -> float:
    """Seconds for the loop, timed by one CUDA event pair (perf_counter on the CPU)."""
    model.train()
    timer = StepTimer(device)
    synchronize(device)
    timer.start()
    for part in eager.batches(len(indices), batch_size):
        idx = indices[part]
        images, labels = split.images[idx], split.labels[idx]
        x = normalise(images)
        y = torch.from_numpy(labels).to(device)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    timer.stop()
    return timer.elapsed_ms()[0] / 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--steps", type=int, default=40, help="training steps per round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of each, alternating")
    parser.add_argument("--nvml-interval-ms", type=int, default=100)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", help="write the result as JSON here")
    args = parser.parse_args()

    device = torch.device(args.device)
    devices.apply_numerics({"backend_flags": {"tf32": False, "cudnn_benchmark": False}})
    n = args.batch * args.steps
    rng = np.random.default_rng(0)
    split = Split(rng.integers(0, 256, (n, 3, args.resolution, args.resolution), dtype=np.uint8),
                  rng.integers(0, 1000, n).astype(np.int64))
    model = init.initialise(resnet.resnet50(3, 1000), "kaiming-normal-fan-out", 0).to(device)
    settings = TrainingSettings(1, args.batch, args.batch, 0.001, 0.9, 0.0)
    optimizer = eager.make_optimizer(model, settings)
    normalise = eager.Normaliser([0.5] * 3, [0.25] * 3, device)
    indices = np.arange(n)
    reader, status = NvmlReader.open(devices.cuda_uuid(device))

    for _ in range(2):  # warm-up: cuDNN heuristics, allocator
        bare_loop(model, optimizer, split, indices, args.batch, normalise, device)

    harness_wall, harness_events, bare = [], [], []
    with NvmlSampler(reader, args.nvml_interval_ms, status) as sampler:
        run = Run("benchmark", device, sampler)
        for r in range(args.rounds):
            timer = StepTimer(device)
            synchronize(device)
            start = time.perf_counter()
            with run.phase(f"train-{r}"):
                eager.train_epoch(model, optimizer, split, indices, args.batch, normalise, timer).result()
            harness_wall.append(time.perf_counter() - start)
            harness_events.append(sum(timer.elapsed_ms()) / 1000.0)
            bare.append(bare_loop(model, optimizer, split, indices, args.batch, normalise, device))

    per_step = lambda xs: 1000.0 * statistics.median(xs) / args.steps
    result = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__, "batch": args.batch, "resolution": args.resolution, "steps": args.steps,
        "rounds": args.rounds, "nvml_status": sampler.status, "nvml_samples": len(sampler.samples),
        "bare_ms_per_step": per_step(bare),
        "harness_wall_ms_per_step": per_step(harness_wall),
        "harness_reported_ms_per_step": per_step(harness_events),
    }
    result["overhead_wall_pct"] = 100 * (result["harness_wall_ms_per_step"] / result["bare_ms_per_step"] - 1)
    result["reported_vs_bare_pct"] = 100 * (result["harness_reported_ms_per_step"] / result["bare_ms_per_step"] - 1)
    print(json.dumps(result, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
