"""Study B configurations, compile modes, compilation and recompile detection (study_b/configurations.py)."""
import time

import pytest
import torch

from abstraction_cost.study_b import configurations as cf
from abstraction_cost.study_b.blocks.interleaved import interleaved

CPU = torch.device("cpu")


def test_four_configurations_numpy_beside_them_and_modes():
    assert set(cf.CONFIGURATIONS) == {"interp", "cpp", "cuda", "triton", "numpy"}
    assert cf.configuration("numpy").pair == "cpu" and "numpy" not in cf.PAIRS["cpu"]   # timed beside the pair
    assert [c.name for c in cf.CONFIGURATIONS.values() if c.compiled] == ["cpp", "triton"]
    assert cf.configuration("cpp").eager == "interp" and cf.configuration("triton").eager == "cuda"
    assert cf.configuration("triton").pair == "gpu" and cf.configuration("interp").pair == "cpu"
    assert cf.COMPILE_MODES == ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
    with pytest.raises(ValueError, match="allowed"):
        cf.configuration("tvm")
    with pytest.raises(ValueError, match="allowed"):
        cf.check_mode("fast")


def test_not_run_reasons():
    cuda, cpp = cf.configuration("cuda"), cf.configuration("cpp")
    assert "torch sees none" in cf.not_run_reason(cuda, "default", "auto", cuda_available=False)
    assert "'device' is 'cpu'" in cf.not_run_reason(cuda, "default", "cpu", cuda_available=True)
    assert cf.not_run_reason(cuda, "reduce-overhead", "auto", cuda_available=True) is None
    assert cf.not_run_reason(cpp, "default") is None
    assert cf.not_run_reason(cpp, "max-autotune-no-cudagraphs") is None
    assert "'default' row" in cf.not_run_reason(cpp, "reduce-overhead")
    assert "'max-autotune-no-cudagraphs' row" in cf.not_run_reason(cf.configuration("interp"), "max-autotune")


def test_eager_prepare_is_the_function_itself():
    fn = lambda x: x + 1  # noqa: E731
    p = cf.prepare(fn, cf.configuration("interp"), "default", (torch.ones(3),), CPU)
    assert p.fn is fn and p.first_call_ms >= 0
    assert p.compile_columns() == {"first_call_ms": p.first_call_ms, "frames_compiled": 0, "graphs": 0,
                                   "graph_breaks": 0, "recompiles": 0, "cache_hits": 0, "cache_misses": 0}


def test_compiled_counts_frames_graph_breaks_and_detects_recompile():
    def fn(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()
    x = torch.randn(8)
    p = cf.prepare(fn, cf.configuration("cpp"), "default", (x,), CPU, backend="eager")
    assert p.frames >= 1 and p.graph_breaks == 1 and p.graphs == 2
    torch.testing.assert_close(p.fn(x), x.sin().cos())
    with cf.no_recompile(p):
        p.fn(torch.randn(8))                      # same shape: guards hold
    with pytest.raises(cf.Recompiled, match="cpp/default"):
        with cf.no_recompile(p):
            p.fn(torch.randn(9))                  # dynamic=False: a new shape recompiles


def test_reset_between_compilations_keeps_cases_apart():
    conv_a, conv_b = torch.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(3, 4, 1)
    pa = cf.prepare(conv_a, cf.configuration("cpp"), "default", (torch.randn(1, 3, 8, 8),), CPU, backend="eager")
    pb = cf.prepare(conv_b, cf.configuration("cpp"), "default", (torch.randn(1, 3, 6, 6),), CPU, backend="eager")
    assert pa.frames >= 1 and pb.frames >= 1


def test_interleaved_alternates_and_counts_warmup_recompiles():
    calls = []
    eager = cf.prepare(lambda x: calls.append("e") or x, cf.configuration("interp"), "default",
                       (torch.ones(2),), CPU)
    other = cf.prepare(lambda x: calls.append("c") or x, cf.configuration("interp"), "default",
                       (torch.ones(2),), CPU)
    calls.clear()
    times = interleaved([eager, other], [(torch.ones(2),)], device=CPU, warmup=1, rounds=3, repeats_per_round=2)
    assert [len(t) for t in times] == [6, 6]
    assert [(r, k) for r, k, _ in times[0]] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    # warm-up, then each callable's turn in a round opens with one untimed call before its two timed ones,
    # and the order alternates between rounds
    assert "".join(calls) == "e" + "c" + "eeeccc" + "ccceee" + "eeeccc"
    assert all(t >= 0 for _, _, t in times[1])
    # the turn pick (measure/affinity.py) runs before each round, after the warm-up
    calls.clear()
    interleaved([eager, other], [(torch.ones(2),)], device=CPU, warmup=1, rounds=3, repeats_per_round=2,
                pick=lambda: calls.append("|"))
    assert "".join(calls) == "e" + "c" + "|eeeccc" + "|ccceee" + "|eeeccc"


def test_interleaved_goes_on_past_its_rounds_until_they_have_lasted_min_seconds():
    slow = cf.prepare(lambda x: time.sleep(0.002) or x, cf.configuration("interp"), "default", (torch.ones(2),), CPU)
    started = time.perf_counter()
    times = interleaved([slow], [(torch.ones(2),)], device=CPU, warmup=1, rounds=2, repeats_per_round=1,
                        min_seconds=0.2)
    assert time.perf_counter() - started >= 0.2
    rounds = [r for r, _, _ in times[0]]
    # each round is at least 2 calls of 2 ms (one untimed): far more than 2 rounds in 0.2 s, numbered on
    assert len(rounds) > 10 and rounds == list(range(len(rounds)))
    # a case slower than min_seconds still gets its rounds
    assert len(interleaved([slow], [(torch.ones(2),)], device=CPU, warmup=1, rounds=3, repeats_per_round=1,
                           min_seconds=0.001)[0]) == 3
    with pytest.raises(ValueError, match="min_seconds"):
        interleaved([slow], [(torch.ones(2),)], device=CPU, warmup=1, rounds=1, repeats_per_round=1, min_seconds=-1)


SCALE = 2.0


def _scaled(x):
    return x * SCALE


def test_interleaved_rejects_recompile_in_timed_loop():
    global SCALE
    SCALE = 2.0
    x = torch.randn(4)
    p = cf.prepare(_scaled, cf.configuration("cpp"), "default", (x,), CPU, backend="eager")
    compiled, calls = p.fn, []

    def drifting(*args):          # after warm-up a global the graph guards on changes: dynamo recompiles
        global SCALE
        calls.append(1)
        if len(calls) == 2:
            SCALE = 3.0
        return compiled(*args)
    p.fn = drifting
    with pytest.raises(cf.Recompiled, match="inside the timed loop"):
        interleaved([p], [(x,)], device=CPU, warmup=1, rounds=2, repeats_per_round=2)
    assert p.recompiles == 0


def test_inductor_cpp_compiles_and_matches_eager():
    x = torch.randn(16, 16)
    p = cf.prepare(torch.mm, cf.configuration("cpp"), "default", (x, x), CPU)
    assert p.frames == 1 and p.graph_breaks == 0
    torch.testing.assert_close(p.fn(x, x), x @ x)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("mode", cf.COMPILE_MODES)
def test_triton_modes_compile_without_recompiles(mode):
    dev = torch.device("cuda")
    x = torch.randn(64, 64, device=dev)
    p = cf.prepare(torch.mm, cf.configuration("triton"), mode, (x, x), dev)
    times = interleaved([p], [(x, x)], device=dev, warmup=3, rounds=2, repeats_per_round=2)
    assert len(times[0]) == 4 and p.recompiles == 0
