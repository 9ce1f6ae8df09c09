"""The sweep's AOTInductor package: exported again with relaxed dims where export cannot prove a guard."""
from __future__ import annotations

from pathlib import Path

import torch


def test_aoti_package_exports_again_with_relaxed_dims_where_export_cannot_prove_a_guard(tmp_path, monkeypatch):
    """torch 2.11 on an H100 refused the grid's ranges over a guard every power of two meets: the package is then
    exported with relaxed dynamic dims, and meta.json says so with the guard. (The AOTInductor compile is stubbed:
    on a 2-core CPU it takes minutes; the package's runs are covered by the GPU runs of the sweep.)"""
    from torch._dynamo.exc import UserError, UserErrorType
    from abstraction_cost.study_a import aoti_dynamic
    from abstraction_cost.models import resnet, weights_file
    weights = tmp_path / "w.weights"
    weights_file.save(resnet.resnet50(3, 10).state_dict(), weights)
    guard = "Not all values of side = L['x'].size()[2] in the specified range 64 <= side <= 256 satisfy the " \
            "generated guard ((((-1) + L['x'].size()[2]) // 2) % 2) != 0."
    real, calls = torch.export.export, []

    def export(model, args, dynamic_shapes):
        calls.append(dynamic_shapes[0])
        if len(calls) == 1:
            raise UserError(UserErrorType.CONSTRAINT_VIOLATION, f"Constraints violated (side)!\n  - {guard}")
        return real(model, args, dynamic_shapes=dynamic_shapes)
    monkeypatch.setattr(torch.export, "export", export)
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package",
                        lambda exported, package_path: Path(package_path).write_text(str(exported.range_constraints)))
    meta = aoti_dynamic.package(weights, 3, 10, [8, 32], [64, 256], torch.device("cpu"), tmp_path / "aoti")
    assert meta["status"] == "ok" and meta["shapes"] == f"relaxed: {guard}"
    assert all(isinstance(d, torch.export.Dim) for d in calls[0].values())  # the grid's ranges first
    assert calls[1] == dict.fromkeys((0, 2, 3), torch.export.Dim.DYNAMIC)
    assert aoti_dynamic.read_meta(tmp_path / "aoti")["shapes"] == meta["shapes"]

    other = UserError(UserErrorType.DYNAMIC_CONTROL_FLOW, "not a guard")
    monkeypatch.setattr(torch.export, "export", lambda *a, **k: (_ for _ in ()).throw(other))
    meta = aoti_dynamic.package(weights, 3, 10, [8, 32], [64, 256], torch.device("cpu"), tmp_path / "aoti")
    assert meta["status"] == "error" and "not a guard" in meta["message"]
