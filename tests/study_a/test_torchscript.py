"""The TorchScript artifact runs in the numerics of the process that loads it. A trace records every convolution as
aten::_convolution with the tracing process's cuDNN flags as constants (allow_tf32 on, PyTorch's default), which
made the traced module run TF32 convolutions in fp32 jobs on the GPU; the artifact's convolutions are rewritten to
aten::convolution, which reads the flags when it runs."""
import pytest
import torch

from abstraction_cost.study_a import torchscript
from abstraction_cost.measure import numerics
from abstraction_cost.models import resnet


def _convolutions(module: torch.jit.ScriptModule) -> dict[str, int]:
    kinds = {"aten::_convolution": 0, "aten::convolution": 0, "aten::conv2d": 0}
    for sub in module.modules():
        for kind in kinds:
            kinds[kind] += len(sub.graph.findAllNodes(kind))
    return kinds


def _traced(model, example, monkeypatch):
    def refuse(_module):
        raise RuntimeError("scripting refused by the test")
    monkeypatch.setattr(torch.jit, "script", refuse)
    return torchscript.make_module(model, example)


def test_a_traced_module_has_no_convolution_with_trace_time_flags_and_computes_eager_s_output(tmp_path, monkeypatch):
    model = resnet.resnet50(3, 10).eval()
    module, method, reason = _traced(model, torch.zeros(1, 3, 32, 32), monkeypatch)
    assert (method, reason) == ("trace", "RuntimeError: scripting refused by the test")
    assert _convolutions(module) == {"aten::_convolution": 0, "aten::convolution": 53, "aten::conv2d": 0}
    torch.jit.save(module, str(tmp_path / "m.pt"))
    loaded = torchscript.load(tmp_path / "m.pt", torch.device("cpu"))
    assert _convolutions(loaded)["aten::_convolution"] == 0
    x = torch.randn(2, 3, 48, 48)  # another shape than the trace's: the graph holds no shape of its own
    with torch.no_grad():
        assert torch.allclose(loaded(x), model(x), rtol=0, atol=1e-5)


def test_a_plain_trace_would_carry_the_flags_so_the_rewrite_is_what_removes_them():
    model = resnet.resnet50(3, 10).eval()
    with torch.no_grad():
        plain = torch.jit.trace(model, torch.zeros(1, 3, 32, 32))
    assert _convolutions(plain)["aten::_convolution"] == 53
    assert torchscript.runtime_flag_convolutions(plain) == 53
    assert torchscript.runtime_flag_convolutions(plain) == 0


@pytest.mark.gpu
def test_a_module_traced_with_tf32_on_runs_fp32_convolutions_in_an_fp32_process(tmp_path, monkeypatch):
    device = torch.device("cuda")
    torch.manual_seed(0)
    model = resnet.resnet50(3, 20).to(device).eval()
    x = torch.randn(16, 3, 128, 128, device=device)
    with torch.no_grad():
        exact = model.double()(x.double()).float()
        model.float()
    numerics.set_tf32(True)  # PyTorch's default for convolutions: what the scripting job's process had
    try:
        module, method, _ = _traced(model, x[:1], monkeypatch)
        with torch.no_grad():
            plain = torch.jit.trace(model, x[:1])
    finally:
        numerics.set_tf32(False)
    assert method == "trace"

    def error(fn):
        with torch.no_grad():
            return float((fn(x) - exact).abs().max() / exact.abs().max())
    eager, rewritten, baked = error(model), error(module), error(plain)
    print(f"relative error against float64 in fp32: eager {eager:.2e}, rewritten trace {rewritten:.2e}, "
          f"plain trace {baked:.2e}")
    assert rewritten <= 2 * eager + 1e-6
    assert baked > numerics.tolerance("fp32").relative  # the check can fail: TF32 beyond fp32's tolerance
