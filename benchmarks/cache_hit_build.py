"""Where does a compiled build's time go when Inductor's cache already holds it? A sweep invocation's compiled
workers spend 49-56 s of its 90-112 s building from the cache (two builds of ResNet-50 at dynamic shapes), a vision
job's compiled worker 6-14 s of each invocation, the CPU pair's whole model 52 s on the GPU box against 19 s on a
2-core machine (docs/results/): this says which phase of torch.compile takes it.

    python benchmarks/cache_hit_build.py --build sweep --device cuda --resolutions 32 256 --runs 3 \
        --out benchmarks/results/<date>_<gpu>_cache_hit_build_sweep.json
    python benchmarks/cache_hit_build.py --build vision --model mobilenet_v2 --device cuda --runs 3
    python benchmarks/cache_hit_build.py --build aoti --device cuda --batch 32 --resolutions 64 256 --runs 0 \
        --compile-threads 4 --profile 40

The first process compiles into an empty cache (cold); each later one is a fresh process on that cache, as a new
invocation's worker is. A process builds the way the pipeline does: `sweep` is the sweep's compiled implementation
(study_a/sweep/python_model.PythonModel: ResNet-50, one dynamic-shape build met at each resolution in turn, with the
sweep's size-oblivious shapes), `vision` Study B's whole model (vision.compile_unit: static shapes), `aoti` the
sweep's AOTInductor package (rule package_aoti_sweep: aoti_dynamic.package over --batch and the --resolutions' range;
its rule gives Inductor 4 compile threads: --compile-threads says how many more would save). Per process:
each build's first call, why dynamo compiled again (its guard failures), Inductor's and AOTAutograd's cache hits
and misses, AOTAutograd's traces (one per build, unless dynamo traced a frame twice: compile_attempt_1), and the
seconds torch.compile's own timers put on each phase (torch._dynamo.utils.compilation_time_metrics, summed; nested
phases overlap), with the compile threads a timing job has (1) unless
--compile-threads says otherwise. --profile N runs each process's builds under cProfile and keeps its N functions of
most cumulative time: where a phase without a timer of its own goes (torch.compile's timers leave part of the
AOTInductor package's AotCodeCompiler.compile uncovered: docs/results/), at cProfile's own overhead on the
Python-bound steps.
--inductor KEY=VALUE (several) sets an Inductor config key in every process before it builds (VALUE read as JSON,
else as a string), to try a setting against the same build: e.g. aot_inductor.emit_multi_arch_kernel=false.
"""
from __future__ import annotations

import argparse
import cProfile
import functools
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the phases worth reading first; the result keeps every timer
PHASES = ("bytecode_tracing", "create_aot_dispatcher_function", "fx_codegen_and_compile",
          "PyCodeCache.load_by_key_path", "async_compile.wait", "build_guards", "OutputGraph.call_user_compiler",
          "_compile.compile_inner", "compile_attempt_0", "compile_attempt_1")


def child(args) -> dict:
    """One process's builds (run with --child: torch is imported here, after the cache variables are set)."""
    import torch
    from torch._dynamo.utils import compilation_time_metrics, counters

    device = torch.device(args.device)
    inductor = inductor_settings(args.inductor)
    for key, value in inductor.items():
        section, _, name = key.rpartition(".")
        setattr(functools.reduce(getattr, section.split(".") if section else [], torch._inductor.config), name, value)
    builds = []
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    if args.build == "sweep":
        from types import SimpleNamespace

        from abstraction_cost.models import resnet, weights_file
        from abstraction_cost.study_a.sweep.python_model import PythonModel

        weights = Path(args.cache) / "resnet50.weights"
        if not weights.exists():
            torch.manual_seed(0)
            weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
        model = PythonModel(f"compiled-{args.mode}", SimpleNamespace(weights=str(weights)), 3, 10, device,
                            compile_shapes="dynamic")
        for resolution in args.resolutions:
            x = torch.randn(args.batch, 3, resolution, resolution, device=device)
            with torch.no_grad():
                seconds = model.build(x)
            builds.append({"input": list(x.shape), "first_call_s": seconds})
    elif args.build == "aoti":
        from abstraction_cost.models import resnet, weights_file
        from abstraction_cost.study_a import aoti_dynamic

        weights = Path(args.cache) / "resnet50.weights"
        if not weights.exists():
            torch.manual_seed(0)
            weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
        out = Path(tempfile.mkdtemp(prefix="aoti-", dir=args.cache)) / "aoti"
        meta = aoti_dynamic.package(weights, 3, 10, [args.batch], args.resolutions, device, out)
        if meta["status"] != "ok":
            raise SystemExit(f"the package failed: {meta['message']}")
        builds.append({"input": [args.batch, 3, min(args.resolutions), max(args.resolutions)],
                       "first_call_s": meta["prepare_s"], "shapes": meta.get("shapes")})
    else:
        import torchvision

        from abstraction_cost.study_b.models import vision

        vision.BACKEND = args.backend
        module = getattr(torchvision.models, args.model)().eval().to(device)
        fn = vision.compile_unit(module, args.mode, args.model)
        x = torch.randn(args.batch, 3, args.resolutions[0], args.resolutions[0], device=device)
        from abstraction_cost.measure.timing import synchronize

        started = time.perf_counter()
        with torch.no_grad():
            fn(x)
        synchronize(device)
        builds.append({"input": list(x.shape), "first_call_s": time.perf_counter() - started})
    cache = {k: v for k, v in {**counters["inductor"], **counters["aot_autograd"]}.items() if "cache" in k}
    phases = {name: round(sum(times), 3) for name, times in compilation_time_metrics.items()}
    # AOTAutograd's traces: more than the builds where dynamo traced a frame again (compile_attempt_1 and on)
    result = {"builds": builds, "cache": cache, "phases": phases, "inductor": inductor,
              "aot_autograd_traces": counters["aot_autograd"]["total"]}
    if profiler is not None:
        profiler.disable()
        result["profile"] = top_functions(pstats.Stats(profiler), args.profile)
    return result


def inductor_settings(pairs: list[str]) -> dict:
    """--inductor's KEY=VALUE pairs, VALUE as JSON where it parses (true, 4), else the string."""
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--inductor {pair}: give KEY=VALUE, e.g. aot_inductor.emit_multi_arch_kernel=false")
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    return settings


def top_functions(stats: pstats.Stats, count: int) -> list[dict]:
    """The `count` functions of most cumulative time: file:line(name), calls, own and cumulative seconds."""
    rows = [{"function": f"{Path(file).name}:{line}({name})", "calls": calls, "own_s": round(own, 3),
             "cumulative_s": round(cumulative, 3)}
            for (file, line, name), (_, calls, own, cumulative, _) in stats.stats.items()]
    return sorted(rows, key=lambda r: -r["cumulative_s"])[:count]


def run_process(args, cache: str) -> dict:
    from abstraction_cost.compile import inductor_env   # imports no torch

    env = {**os.environ, **inductor_env.cache_env(cache, args.compile_threads),
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
           **dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS"), str(args.threads)),
           "TORCH_LOGS": "recompiles"}   # why a build after the first: dynamo's guard failures, on stderr
    command = [sys.executable, __file__, "--child", "--cache", cache, "--build", args.build, "--model", args.model,
               "--mode", args.mode, "--backend", args.backend, "--device", args.device, "--batch", str(args.batch),
               "--resolutions", *map(str, args.resolutions), "--profile", str(args.profile),
               *(f"--inductor={pair}" for pair in args.inductor)]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"cache_hit_build: a build process failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    recompiles = [line.split("[__recompiles]", 1)[1].strip() for line in done.stderr.splitlines()
                  if "[__recompiles]" in line]
    return {"process_s": round(time.perf_counter() - started, 2), **result, "recompiles": recompiles}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", choices=("sweep", "vision", "aoti"), default="sweep")
    p.add_argument("--model", default="mobilenet_v2", help="vision: a torchvision model")
    p.add_argument("--mode", default="default", help="torch.compile's mode")
    p.add_argument("--backend", default="inductor", help="vision: torch.compile's backend (tests: eager)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--resolutions", type=int, nargs="+", default=[32, 256],
                   help="sweep: the shapes one dynamic build meets in turn; vision: the first only")
    p.add_argument("--runs", type=int, default=3, help="warm processes after the cold one (0: the cold one only)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (a timing job has 1)")
    p.add_argument("--compile-threads", type=int, default=1, help="Inductor's compile threads (a timing job: 1)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="keep the N functions of most cumulative time under cProfile (0: no profiler)")
    p.add_argument("--inductor", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                   help="Inductor config keys to set in every build process (torch._inductor.config)")
    p.add_argument("--cache", help=argparse.SUPPRESS)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return {}
    if args.runs < 0:
        p.error("--runs: 0 or more warm processes")
    if args.build == "sweep" and args.backend != "inductor":
        p.error("--backend: the sweep's build is Inductor's (PythonModel); other backends for --build vision only")
    with tempfile.TemporaryDirectory(prefix="cache-hit-build-") as cache:
        processes = [{"state": "cold", **run_process(args, cache)}]
        processes += [{"state": "warm", **run_process(args, cache)} for _ in range(args.runs)]
    import torch
    result = {"benchmark": "cache_hit_build", "device": torch.cuda.get_device_name(0) if args.device == "cuda"
              else "cpu", "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
              "settings": {k: v for k, v in vars(args).items() if k not in ("cache", "child", "out")},
              "processes": processes}
    for proc in processes:
        firsts = ", ".join(f"{b['first_call_s']:.1f} s" for b in proc["builds"])
        phases = ", ".join(f"{name} {proc['phases'][name]:.1f}" for name in PHASES if name in proc["phases"])
        print(f"{proc['state']}: process {proc['process_s']:.1f} s, builds {firsts}; AOTAutograd traces "
              f"{proc['aot_autograd_traces']}; cache {proc['cache']}")
        print(f"    {phases}")
        for line in proc["recompiles"]:
            print(f"    recompile: {line}")
        for row in proc.get("profile", [])[:15]:
            print(f"    {row['cumulative_s']:8.1f} s cumulative, {row['own_s']:7.1f} own, {row['calls']:7d} calls  "
                  f"{row['function']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
