"""The hand-written cuDNN/cuBLAS ResNet-50 (native/cudnn) against eager and libtorch: evaluation time per batch,
a training step, and device memory, at the same numerics (fp32, TF32 off unless --tf32).

- eval: for each batch size, one process per implementation (eager in Python, `ac_libtorch eval --model libtorch`,
  `ac_cudnn eval --model cudnn` and `cudnn-graphs`) evaluates one synthetic uint8 batch of 3×R×R: `--warmup`
  untimed calls, then `--repeats` calls timed as every backend is timed (H2D copy to logits, CUDA events);
- train: at --train-batch, each implementation trains two epochs of --train-steps steps on synthetic data; the
  second epoch's time per step is reported (the first pays algorithm choice and allocator growth);
- memory: the launcher polls NVML's device memory used every 5 ms while the process runs; the peak minus the
  reading before it started is `nvml_peak_mib`; `alloc_peak_mib` is the process's own allocator peak.
Numerics: torch's cudnn.benchmark off with `--conv-algo heuristic` (the cuDNN program's v7 heuristics), on with
`find`. Rows are written to --out (JSON) and a markdown table beside it after every measurement.

    python benchmarks/cudnn_backend.py --batches 32,64,128,256 --out cudnn_backend.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

from abstraction_cost.config import TrainingSettings
from abstraction_cost.data import offline, prepared
from abstraction_cost.data import order as orders
from abstraction_cost.data.specs import DatasetSpec
from abstraction_cost.models import init, resnet, weights_file
from abstraction_cost.programs import native
from abstraction_cost.study_a import cudnn

CLASSES = 10
EVAL_IMPLEMENTATIONS = ("eager", "libtorch", "cudnn", "cudnn-graphs")


def _config(args) -> dict:
    return {"device": "cuda", "seed": 0,
            "backend_flags": {"tf32": args.tf32, "cudnn_benchmark": args.conv_algo == "find"},
            "measure": {"nvml_interval_ms": 100, "warmup": args.warmup, "repeats": args.repeats},
            "study_a": {"cudnn": {"algo": args.conv_algo, "workspace_limit_mib": args.workspace_limit_mib}}}


class NvmlPeak:
    """Device memory used (NVML), polled while a child process runs: the peak above the reading before it."""

    def __init__(self, interval_s: float = 0.005):
        import pynvml
        pynvml.nvmlInit()
        index = torch.cuda.current_device() if torch.cuda.is_available() else 0
        self._nvml, self._handle, self._interval = pynvml, pynvml.nvmlDeviceGetHandleByIndex(index), interval_s

    def used(self) -> int:
        return self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used

    def run(self, command: list[str], env: dict) -> tuple[subprocess.CompletedProcess, float]:
        base, peak, done = self.used(), [0], threading.Event()

        def poll():
            while not done.is_set():
                peak[0] = max(peak[0], self.used())
                time.sleep(self._interval)

        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        try:
            proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
        finally:
            done.set()
            thread.join()
        return proc, max(peak[0] - base, 0) / 2**20


def _records(proc) -> list[dict]:
    return [r for r in map(native.record_of, proc.stdout.splitlines()) if r is not None]


def prepare(root: Path, args) -> tuple[Path, dict, Path, Path]:
    """Synthetic data at R×R: a test split of the largest eval batch, a training split of train_batch × steps."""
    shape = DatasetSpec("synthetic-bench", 3, args.resolution, args.resolution, tuple(map(str, range(CLASSES))))
    train_count = args.train_batch * max(args.train_steps, 1)
    splits = offline.synthetic(shape, train_count, max(args.batches))
    manifest = prepared.write(root / "data", "bench", splits, list(shape.class_names), [])
    weights = root / "init.weights"
    weights_file.save(init.initialise(resnet.resnet50(3, CLASSES), "zero-gamma", 0).state_dict(), weights)
    order = root / "order.i32"
    orders.write(order, train_count, 0, 2)
    return root / "data", manifest, weights, order


# ------------------------------------------------------------------------------------------ the commands
def eval_command(implementation: str, batch: int, data, manifest, weights, args) -> list[str]:
    config, device = _config(args), torch.device("cuda")
    if implementation == "eager":
        return [sys.executable, __file__, "--worker", "eval", "--data", str(data), "--weights", str(weights),
                "--batch", str(batch), "--warmup", str(args.warmup), "--repeats", str(args.repeats),
                *(["--tf32"] if args.tf32 else []), "--conv-algo", args.conv_algo]
    if implementation == "libtorch":
        return native.eval_command(native.program_path("libtorch"), "libtorch", data, manifest, batch, args.warmup,
                                   args.repeats, config, device, weights=weights, classes=CLASSES)
    return cudnn.eval_command(cudnn.program_path(), implementation, data, manifest, batch, args.warmup,
                              args.repeats, config, device, weights=weights, classes=CLASSES)


def train_command(implementation: str, data, manifest, weights, order, args) -> list[str]:
    config, device = _config(args), torch.device("cuda")
    settings = TrainingSettings(epochs=2, batch_size=args.train_batch, eval_batch_size=args.train_batch, lr=0.01,
                                momentum=0.9, weight_decay=1e-4)
    if implementation == "eager":
        return [sys.executable, __file__, "--worker", "train", "--data", str(data), "--weights", str(weights),
                "--order", str(order), "--batch", str(args.train_batch), *(["--tf32"] if args.tf32 else []),
                "--conv-algo", args.conv_algo]
    if implementation == "libtorch":
        return native.train_command(native.program_path("libtorch"), data, manifest, weights, order, settings,
                                    config, device)
    return cudnn.train_command(cudnn.program_path(), data, manifest, weights, order, settings, config, device,
                               graphs=implementation == "cudnn-graphs")


# ------------------------------------------------------------------- eager, in a process of its own
def worker(args) -> None:
    from abstraction_cost.study_a import eager
    from abstraction_cost.study_a.comparison import serial as eval_job
    from abstraction_cost.measure.run import measured_run

    config = _config(args)
    data = prepared.load(args.data)
    model = weights_file.load_into(resnet.resnet50(3, CLASSES), args.weights).cuda()
    with tempfile.TemporaryDirectory() as tmp, \
            measured_run(config, rule="bench", job={}, env_path=Path(tmp) / "env.parquet") as run:
        torch.cuda.reset_peak_memory_stats()
        if args.worker == "eval":
            images = np.array(data.test.images[:args.batch], copy=True)
            times, _ = eval_job.time_python(model.eval(), images, data.mean, data.std, run, args.warmup,
                                            args.repeats)
            record = {"kind": "eval", "times_ms": times}
        else:
            order = orders.read(args.order, len(data.train.labels), 2)
            settings = TrainingSettings(epochs=2, batch_size=args.batch, eval_batch_size=args.batch, lr=0.01,
                                        momentum=0.9, weight_decay=1e-4)
            rows = eager.train(model, data, order, settings, run)
            record = {"kind": "phases", "rows": [{k: r.get(k) for k in ("epoch", "phase", "time_s", "samples")}
                                                 for r in rows]}
        record["alloc_peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps(record), flush=True)


# --------------------------------------------------------------------------------------------- measure
def measure_eval(implementation, batch, paths, args, nvml) -> dict:
    proc, peak = nvml.run(eval_command(implementation, batch, *paths[:3], args), native.runtime_env())
    row = {"kind": "eval", "implementation": implementation, "batch": batch, "nvml_peak_mib": peak}
    records = [r for r in _records(proc) if r["kind"] == "eval"]
    if proc.returncode != 0 or not records:
        return {**row, "status": "error", "message": (proc.stdout + proc.stderr)[-600:]}
    times = records[-1]["times_ms"]
    median = statistics.median(times)
    return {**row, "status": "ok", "median_ms": median, "q25_ms": float(np.percentile(times, 25)),
            "q75_ms": float(np.percentile(times, 75)), "per_sample_ms": median / batch,
            "alloc_peak_mib": records[-1].get("alloc_peak_mib"), "workspace_mib": records[-1].get("workspace_mib")}


def measure_train(implementation, paths, args, nvml) -> dict:
    data, manifest, weights, order = paths
    proc, peak = nvml.run(train_command(implementation, data, manifest, weights, order, args), native.runtime_env())
    row = {"kind": "train", "implementation": implementation, "batch": args.train_batch, "nvml_peak_mib": peak}
    records = _records(proc)
    phases = [r for r in records if r["kind"] == "phase"]
    phases += [p for r in records if r["kind"] == "phases" for p in r["rows"]]
    second = [p for p in phases if p["epoch"] == 1 and p["phase"] == "train"]
    if proc.returncode != 0 or not second:
        return {**row, "status": "error", "message": (proc.stdout + proc.stderr)[-600:]}
    step_ms = 1000 * second[0]["time_s"] / args.train_steps
    alloc = max((r.get("alloc_peak_mib") or 0) for r in records if r["kind"] in ("phase", "phases"))
    return {**row, "status": "ok", "median_ms": step_ms, "per_sample_ms": step_ms / args.train_batch,
            "alloc_peak_mib": alloc}


def write(rows: list[dict], out: Path, meta: dict) -> None:
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    os.replace(tmp, out)
    lines = ["| kind | implementation | batch | ms per batch/step | ms per sample | NVML peak MiB | alloc peak MiB |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"| {r['kind']} | {r['implementation']} | {r['batch']} | {r['status']} | | | |")
            continue
        alloc = f"{r['alloc_peak_mib']:.0f}" if r.get("alloc_peak_mib") is not None else ""
        lines.append(f"| {r['kind']} | {r['implementation']} | {r['batch']} | {r['median_ms']:.2f} | "
                     f"{r['per_sample_ms']:.4f} | {r['nvml_peak_mib']:.0f} | {alloc} |")
    md = out.with_suffix(".md")
    md.with_name(md.name + ".tmp").write_text("\n".join(lines) + "\n")
    os.replace(md.with_name(md.name + ".tmp"), md)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", default="32,64,128,256")
    parser.add_argument("--resolution", type=int, default=224)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--train-batch", type=int, default=32)
    parser.add_argument("--train-steps", type=int, default=10, help="0: evaluation only")
    parser.add_argument("--conv-algo", choices=["heuristic", "find"], default="heuristic")
    parser.add_argument("--workspace-limit-mib", type=int, default=1024)
    parser.add_argument("--tf32", action="store_true")
    parser.add_argument("--implementations", default=",".join(EVAL_IMPLEMENTATIONS))
    parser.add_argument("--out", type=Path, default=Path("cudnn_backend.json"))
    # the eager worker (run by this script in a process of its own)
    parser.add_argument("--worker", choices=["eval", "train"])
    parser.add_argument("--data"), parser.add_argument("--weights"), parser.add_argument("--order")
    parser.add_argument("--batch", type=int)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if not torch.cuda.is_available():
        sys.exit("cudnn_backend.py measures on a CUDA GPU; this machine has none")
    args.batches = [int(b) for b in args.batches.split(",")]
    implementations = args.implementations.split(",")
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "resolution": args.resolution, "tf32": args.tf32,
            "conv_algo": args.conv_algo, "warmup": args.warmup, "repeats": args.repeats}
    nvml, rows = NvmlPeak(), []
    with tempfile.TemporaryDirectory() as tmp:
        paths = prepare(Path(tmp), args)
        # training first (the step comparison at batch 32), unless --train-steps 0
        for implementation in implementations if args.train_steps else ():
            rows.append(measure_train(implementation, paths, args, nvml))
            write(rows, args.out, meta)
        for batch in args.batches:
            for implementation in implementations:
                rows.append(measure_eval(implementation, batch, paths, args, nvml))
                write(rows, args.out, meta)
                print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
