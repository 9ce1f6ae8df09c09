"""Study B Fig. 5.4's predictor (tables conv_predictor, conv_predictor_summary): a small MLP that predicts a
ResNet-50 convolution's speedup under torch.compile from its parameters, trained and tested on the ResNet-50
convolution table. The study reports its MLP "within 5% with 95% accuracy".

Every prediction is made by a model that did not see that convolution (leave-one-out over the distinct
convolutions of one pair, mode and target), so the accuracy is a held-out one. Beside it, the same held-out score
of predicting the mean of the other convolutions' speedups: with speedups close to 1 that alone is often within
5%, and an MLP is worth something only where it does better."""
from __future__ import annotations

import numpy as np
import polars as pl

from .. import tables

FEATURES = ["in_channels", "out_channels", "kernel", "stride", "padding", "input_size", "batch"]
LOG2 = {"in_channels", "out_channels", "input_size", "batch"}
TARGETS = ("isolated", "in_model")
MIN_CONVOLUTIONS = 4      # fewer: nothing to learn from once one is held out
WITHIN = 0.05
STUDY_WITHIN = 0.95


def _features(rows: pl.DataFrame) -> np.ndarray:
    columns = [np.log2(rows[c].cast(pl.Float64).to_numpy()) if c in LOG2 else rows[c].cast(pl.Float64).to_numpy()
               for c in FEATURES]
    return np.column_stack(columns)


def _model(seed: int):
    from sklearn.neural_network import MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    # lbfgs: a full-batch solver suits a few dozen rows; the target is log speedup, so errors are relative
    return make_pipeline(StandardScaler(), MLPRegressor(hidden_layer_sizes=(16, 16), solver="lbfgs", alpha=1e-2,
                                                        max_iter=5000, random_state=seed))


def leave_one_out(x: np.ndarray, speedup: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Held-out MLP predictions and held-out mean predictions of each speedup."""
    target = np.log(speedup)
    predicted, baseline = np.empty_like(speedup), np.empty_like(speedup)
    for i in range(len(speedup)):
        train = np.arange(len(speedup)) != i
        model = _model(seed).fit(x[train], target[train])
        predicted[i] = float(np.exp(model.predict(x[i:i + 1])[0]))
        baseline[i] = float(np.exp(target[train].mean()))
    return predicted, baseline


def predictor_rows(convs: pl.DataFrame, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Tables conv_predictor and conv_predictor_summary from table study_b_resnet50_conv_speedups."""
    rows, summary = [], []
    for target in TARGETS:
        status, speedup = f"{target}_status", f"{target}_speedup"
        usable = convs.filter((pl.col(status) == "ok") & (pl.col(speedup) > 0)).drop_nulls(FEATURES)
        for (pair, mode), part in usable.group_by("pair", "mode", maintain_order=True):
            run_id = ",".join(sorted(set(part["run_id"].to_list())))
            head = {**dict.fromkeys(tables.schema("conv_predictor_summary")), "run_id": run_id, "pair": pair,
                    "mode": mode, "target": target, "convolutions": part.height,
                    "study_within_5pct": STUDY_WITHIN}
            if part.height < MIN_CONVOLUTIONS:
                summary.append({**head, "status": "not_run", "message": f"{part.height} convolutions with a "
                                f"{target} speedup: at least {MIN_CONVOLUTIONS} are needed to hold one out "
                                "(study_b.blocks.resnet50_convs.limit)"})
                continue
            measured = part[speedup].to_numpy()
            predicted, baseline = leave_one_out(_features(part), measured, seed)
            error, base_error = np.abs(predicted / measured - 1), np.abs(baseline / measured - 1)
            for conv_id, m, p, b, e, be in zip(part["conv_id"], measured, predicted, baseline, error, base_error):
                rows.append({"run_id": run_id, "pair": pair, "mode": mode, "target": target, "conv_id": conv_id,
                             "measured_speedup": m, "predicted_speedup": p, "baseline_speedup": b,
                             "relative_error": e, "within_5pct": bool(e <= WITHIN),
                             "baseline_within_5pct": bool(be <= WITHIN)})
            summary.append({**head, "status": "ok", "message": None,
                            "within_5pct": float((error <= WITHIN).mean()),
                            "baseline_within_5pct": float((base_error <= WITHIN).mean()),
                            "median_relative_error": float(np.median(error))})
    return tables.frame("conv_predictor", rows), tables.frame("conv_predictor_summary", summary)
