"""The building-block experiments by name: the config section each reads, the tables it writes, the columns that
identify its cases, and whether a timing job of one can run here. The workflow reads them while it builds its DAG
(which jobs, tables and warm-ups exist), so this module imports no torch; what a job times is experiments.py's.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...tables import study_b_blocks as schemas
from ..configurations import not_run_reason, pair_configurations


@dataclass(frozen=True)
class Experiment:
    config_key: str          # section under study_b.blocks
    table: str               # timing table
    speedup_table: str | None
    keys: tuple[str, ...]    # columns that identify a case


EXPERIMENTS = {
    "matmul": Experiment("matmul", "study_b_matmul", "study_b_matmul_speedups", tuple(schemas.MATMUL_KEYS)),
    "conv_ablation": Experiment("conv_ablation", "study_b_conv_ablation", "study_b_conv_ablation_speedups",
                                tuple(schemas.ABLATION_KEYS)),
    "resnet50_convs": Experiment("resnet50_convs", "study_b_resnet50_convs", None,
                                 (*schemas.RESNET_CONV_KEYS, "occurrences", "layers")),
    "resnet50_in_model": Experiment("resnet50_convs", "study_b_resnet50_in_model", None,
                                    tuple(schemas.RESNET_CONV_KEYS)),
    "conv_blocks": Experiment("conv_blocks", "study_b_conv_blocks", "study_b_conv_blocks_speedups",
                              tuple(schemas.BLOCK_KEYS)),
}


def experiment(name: str) -> Experiment:
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise ValueError(f"unknown Study B block experiment {name!r}; allowed: {sorted(EXPERIMENTS)}") from None


def job_not_run_reason(config: dict, pair: str, mode: str, require_gpu: bool, cuda_available: bool) -> str | None:
    """Why a timing job of this pair and mode cannot run here, or None: require_gpu without a GPU, the pair's
    device missing (torch is asked only for the gpu pair, and not with device cpu), or a mode the pair's device
    lacks."""
    if require_gpu and not cuda_available:
        return "config key 'study_b.blocks.require_gpu' is true and this machine has no CUDA GPU"
    return not_run_reason(pair_configurations(pair)[1], mode, config["device"])
