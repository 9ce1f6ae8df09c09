"""Host input of a sweep cell: how long `CellInput.load` (study_a/transfer.py) takes to make one cell's host batch,
against the same batch made out of place (`(x / 255 - mean) / std` on the gathered batch, then `pin_memory()`),
which is how the sweep made it before. Both must give the same bytes; the benchmark checks that first.

The host input is made once per cell, untimed, but it is part of a sweep job's wall time (issue 10's overhead):
at batch 128, 1024 px a float32 batch is 1.6 GB, and each temporary of the out-of-place formula is another pass
over it. Pinned modes need CUDA; without it they are left out.

    python benchmarks/host_input.py --points 128:1024 32:256 --repeats 3 --out host_input.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep_overhead import make_inputs  # noqa: E402

from abstraction_cost.study_a import transfer  # noqa: E402
from abstraction_cost.study_a.sweep.cells import TRANSFERS  # noqa: E402


def out_of_place(data: transfer.CellInput, pool: transfer.Pool) -> torch.Tensor:
    """The batch as the sweep made it before it was written in place."""
    images = pool.images(data.resolution)
    host = torch.from_numpy(images[np.arange(data.batch) % len(images)])
    if not data.uint8:
        host = (host.float().div_(255.0) - data.mean.cpu()) / data.std.cpu()
    if data.transfer != "float32-pageable" and data.device_buffer.is_cuda:
        host = host.pin_memory()
    return host.contiguous()


def in_place(data: transfer.CellInput, pool: transfer.Pool) -> torch.Tensor:
    data.load(pool)
    return data.host


def seconds(make, data: transfer.CellInput, pool: transfer.Pool, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        data.host = None
        started = time.perf_counter()
        make(data, pool)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", nargs="+", default=["128:1024", "32:256"], help="BATCH:RESOLUTION cells")
    parser.add_argument("--pool", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    modes = transfer_modes(device)
    points = [tuple(int(v) for v in p.split(":")) for p in args.points]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        make_inputs(Path(work), sorted({r for _, r in points}), args.pool)
        pool = transfer.Pool(work)
        for batch, resolution in points:
            for mode in modes:
                data = transfer.cell_input(pool, batch, resolution, mode, device)
                if not torch.equal(out_of_place(data, pool), in_place(data, pool)):
                    raise SystemExit(f"batch {batch}, {resolution} px, {mode}: the two ways give different bytes")
                before = seconds(out_of_place, data, pool, args.repeats)
                after = seconds(in_place, data, pool, args.repeats)
                rows.append({"batch": batch, "resolution": resolution, "transfer": mode,
                             "bytes": data.nbytes, "out_of_place_s": statistics.median(before),
                             "in_place_s": statistics.median(after), "out_of_place_all_s": before,
                             "in_place_all_s": after})
                print(f"batch {batch:4d}, {resolution:4d} px, {mode:16s}: {data.nbytes / 2**20:8.1f} MiB, "
                      f"out of place {rows[-1]['out_of_place_s']:.3f} s, in place {rows[-1]['in_place_s']:.3f} s")
                data = None
    args.out.write_text(json.dumps({"device": str(device), "cpus": os.cpu_count(), "host": platform.node(),
                                    "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                                    "repeats": args.repeats, "rows": rows}, indent=1))


def transfer_modes(device: torch.device) -> list[str]:
    """Every mode on a GPU; on the CPU the pinned modes are the pageable ones (pinning needs CUDA)."""
    return list(TRANSFERS) if device.type == "cuda" else ["float32-pageable", "uint8-pinned"]


if __name__ == "__main__":
    main()
