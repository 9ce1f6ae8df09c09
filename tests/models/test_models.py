import subprocess
import sys

import pytest
import torch

from abstraction_cost.models import init, resnet, weights_file


def _model(scheme="kaiming-normal-fan-out", seed=0, channels=1, classes=10):
    return init.initialise(resnet.resnet50(channels, classes), scheme, seed)


def test_topology_is_resnet50():
    model = resnet.resnet50(1, 20)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 53  # 1 stem + 16 blocks × 3 + 4 projections
    assert model.conv1.in_channels == 1 and model.fc.out_features == 20
    assert [len(getattr(model, f"layer{i}")) for i in range(1, 5)] == [3, 4, 6, 3]
    assert model(torch.zeros(2, 1, 28, 28)).shape == (2, 20)


def test_resnet50_is_torchvisions():
    """The written-out network against torchvision's: parameter names and shapes, the weights drawn from one
    seed (so the modules are made and initialised in torchvision's order), the logits and the operators run."""
    import torchvision
    torch.manual_seed(3)
    theirs = torchvision.models.resnet50(weights=None, num_classes=7).eval()
    torch.manual_seed(3)
    ours = resnet.resnet50(3, 7).eval()
    a, b = theirs.state_dict(), ours.state_dict()
    assert list(a) == list(b)
    assert all(torch.equal(a[k], b[k]) for k in a)
    x = torch.rand(2, 3, 64, 64)

    def ops(model):
        with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            out = model(x)
        return out, [e.name for e in prof.events() if e.name.startswith("aten::")]
    (theirs_out, theirs_ops), (ours_out, ours_ops) = ops(theirs), ops(ours)
    assert torch.equal(theirs_out, ours_out)
    assert ours_ops == theirs_ops


def test_building_the_network_imports_no_torchvision():
    """A sweep job's start-up: importing torchvision (and with it torch._dynamo) is what the written-out network
    saves."""
    code = ("import sys; from abstraction_cost.models import init, resnet, weights_file; "
            "init.initialise(resnet.resnet50(3, 10), 'zero-gamma', 0); "
            "assert 'torchvision' not in sys.modules, 'torchvision imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_init_schemes_differ_and_are_seeded():
    a, b = _model("pytorch-default"), _model("kaiming-normal-fan-out")
    assert not torch.equal(a.conv1.weight, b.conv1.weight)
    assert torch.equal(_model(seed=5).conv1.weight, _model(seed=5).conv1.weight)
    assert not torch.equal(_model(seed=5).conv1.weight, _model(seed=6).conv1.weight)
    # kaiming fan-out: std = sqrt(2 / (out_channels * k * k)) on the stem
    assert b.conv1.weight.std().item() == pytest.approx((2 / (64 * 49)) ** 0.5, rel=0.1)


def test_zero_gamma_zeroes_the_last_batch_norm_of_every_block():
    model = _model("zero-gamma")
    for stage in (model.layer1, model.layer2, model.layer3, model.layer4):
        for block in stage:
            assert torch.count_nonzero(block.bn3.weight) == 0
            assert torch.all(block.bn2.weight == 1)


def test_weights_file_round_trip(tmp_path):
    model = _model()
    weights_file.save(model.state_dict(), tmp_path / "w.weights")
    other = weights_file.load_into(resnet.resnet50(1, 10), tmp_path / "w.weights")
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, other.state_dict()[name]), name


def test_weights_file_errors_name_the_file_and_the_fault(tmp_path):
    path = tmp_path / "w.weights"
    weights_file.save(_model().state_dict(), path)
    with pytest.raises(weights_file.WeightsFileError, match="fc.weight has shape \\(10, 2048\\), the model expects \\(5, 2048\\)"):
        weights_file.load_into(resnet.resnet50(1, 5), path)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(weights_file.WeightsFileError, match="truncated"):
        weights_file.load(path)
    path.write_bytes(b"PK\x03\x04" + b"\0" * 20)
    with pytest.raises(weights_file.WeightsFileError, match="not a weights file"):
        weights_file.load(path)
