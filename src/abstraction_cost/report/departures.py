"""Where this pipeline's method departs from a study's, stated beside the study's number: numerics, batch, profiled
or not, dynamic or static shapes, mean or median (and over how many calls), and the GPU generation.

Each study figure the report sets a measured number beside has an entry in STUDIES: what the study did, as SPEC.md
and the studies' text state it (None where the study does not say). What was done here is read from the table the
figure draws (its numerics, batch and count columns) and from the environment rows its run_ids join (the GPU);
what the table cannot say (profiled or not, shapes) the section passes, since it knows how its rule measured.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from .numerics import numerics_by_table


@dataclass(frozen=True)
class Method:
    """How a study measured the numbers of one figure (None: not stated by the study)."""
    numerics: str | None
    batch: str | None
    profiled: bool | None
    shapes: str | None
    statistic: str | None
    gpu: str | None


_A_GPU = "not named in SPEC (PyTorch 1.7, cuDNN 8)"
_B = dict(numerics="fp32", gpu="V100 (Volta), PyTorch 2.3", statistic="median of 20 runs (10 rounds × 2 calls)")
STUDIES = {
    "study_a_sweep": Method(numerics="fp32", batch="8 to 1024, one cell at a time", profiled=False,
                            shapes="static (each implementation run at each cell, no compiler)",
                            statistic="10 repeats per cell (statistic not stated)", gpu=_A_GPU),
    "study_a_kernels": Method(numerics="fp32", batch="32", profiled=True, shapes="static", statistic=None, gpu=_A_GPU),
    "study_a_training": Method(numerics="fp32", batch="128 (16 on PASCAL)", profiled=False, shapes="static",
                               statistic="mean epoch time, 10 repeats", gpu=_A_GPU),
    "study_a_backends": Method(numerics="fp32", batch=None, profiled=False, shapes="static", statistic=None,
                               gpu=_A_GPU),
    "study_b_matmul": Method(batch=None, profiled=False, shapes="static (torch.compile's default)", **_B),
    "study_b_blocks": Method(batch="1", profiled=False, shapes="static (torch.compile's default)", **_B),
    "study_b_in_model": Method(batch="1", profiled=True, shapes="static (torch.compile's default)", **_B),
    "study_b_e2e": Method(batch=None, profiled=True, shapes="static (torch.compile's default)", **_B),
    "study_b_layers": Method(batch=None, profiled=False, shapes="static (torch.compile's default)", **_B),
}

STUDY_B_SHAPES = "static (torch.compile dynamic=False)"  # every Study B compile (study_b/configurations.py)

# NVIDIA's architecture generation by product name (the environment table's gpu_name); first match wins.
GENERATIONS = [(r"\bB[12]00\b|GB200|RTX 50\d\d", "Blackwell"), (r"\bH[12]00\b|GH200", "Hopper"),
               (r"\bL4\b|\bL40|RTX 40\d\d|RTX 6000 Ada", "Ada"), (r"\bA\d{1,3}\b|RTX 30\d\d|RTX A\d", "Ampere"),
               (r"\bT4\b|RTX 20\d\d|Quadro RTX|TITAN RTX", "Turing"), (r"V100|TITAN V\b", "Volta"),
               (r"P100|P40|P4\b|GTX 10\d\d|TITAN X", "Pascal"), (r"K80|K40", "Kepler")]


def generation(gpu_name: str | None) -> str | None:
    for pattern, name in GENERATIONS:
        if gpu_name and re.search(pattern, gpu_name):
            return name
    return None


def _joined(values) -> str:
    values = sorted({str(v) for v in values if v is not None}, key=lambda v: (len(v), v))
    return ", ".join(values)


def _ok(table: pl.DataFrame) -> pl.DataFrame:
    return table.filter(pl.col("status") == "ok") if "status" in table.columns else table


def here_numerics(table: pl.DataFrame, environment: pl.DataFrame) -> str | None:
    found = numerics_by_table({"t": table}, environment)
    return found["numerics"][0] if found.height else None


def here_batch(table: pl.DataFrame) -> str | None:
    ok = _ok(table)
    for column in ("batch_size", "batch"):
        if column in ok.columns and ok[column].drop_nulls().len():
            return _joined(ok[column].unique().to_list())
    return None


def here_statistic(table: pl.DataFrame, counts: tuple[str, ...] = ("repeats", "samples", "eager_samples")) -> str:
    """'median over 5–20 timed calls' from the table's count column; with the invocations where it has them."""
    ok = _ok(table)
    text = "median"
    for column in counts:
        if column in ok.columns and ok[column].drop_nulls().len():
            low, high = ok[column].min(), ok[column].max()
            text += f" over {low if low == high else f'{low}–{high}'} timed calls"
            break
    if "invocations" in ok.columns and ok["invocations"].drop_nulls().len():
        low, high = ok["invocations"].min(), ok["invocations"].max()
        text += f" in {low if low == high else f'{low}–{high}'} process invocations"
    else:
        text += " in one process"
    return text


def training_statistic(summary: pl.DataFrame) -> str:
    """The training figure's statistic here: how many repeats (training_summary.repeats_ok), the first epoch apart
    from the median of the later ones, and the curve's mean epoch time (the study's statistic)."""
    repeats = summary["repeats_ok"].drop_nulls() if "repeats_ok" in summary.columns else pl.Series([], dtype=pl.Int64)
    low, high = (repeats.min(), repeats.max()) if repeats.len() else (None, None)
    count = "repeats not recorded" if low is None else (
        f"{low if low == high else f'{low}–{high}'} repeat{'' if high == 1 else 's'}")
    return f"{count}; the first epoch apart from the median of the later ones, the curve the mean epoch time"


def here_gpu(table: pl.DataFrame, environment: pl.DataFrame) -> str | None:
    """The GPU models (and generation) of the environment rows the table's ok rows join by run_id (a derived
    row's comma-separated run_ids each count); 'the CPU' where those jobs ran on no GPU."""
    ok = _ok(table)
    if ok.is_empty() or environment.is_empty() or "run_id" not in ok.columns:
        return None
    ids = ok.select(pl.col("run_id").str.split(",").explode().str.strip_chars()).unique()
    jobs = environment.join(ids, on="run_id", how="semi")
    names = sorted(set(jobs["gpu_name"].drop_nulls().to_list()))
    if not names:
        return "the CPU (no GPU)" if set(jobs["device"].drop_nulls().to_list()) == {"cpu"} else None
    return ", ".join(f"{n} ({generation(n) or 'generation unknown'})" for n in names)


def _profiled(value: bool | None) -> str | None:
    return None if value is None else "inside the profiler" if value else "unprofiled"


def built_shapes(table: pl.DataFrame) -> str:
    """'static', or 'static, except the dynamic-shape builds of aoti, compiled-default' from the table's build
    column: a per-shape build (a compile or a CUDA graph per shape) runs static shapes like an unbuilt model."""
    dynamic = _ok(table).filter(pl.col("build") == "dynamic")
    if dynamic.is_empty():
        return "static"
    return "static, except the dynamic-shape builds of " + _joined(dynamic["implementation"].unique().to_list())


def departures(study: str, table: pl.DataFrame, environment: pl.DataFrame, *, profiled: bool,
               shapes: str | None = None, statistic: str | None = None, batch: str | None = None) -> str:
    """One sentence for beside the study's number: each of the six aspects here and in the study, the ones that
    differ first. `shapes` defaults to built_shapes where the table has a `build` column (Study A's sweep)."""
    method = STUDIES[study]
    if shapes is None and "build" in table.columns:
        shapes = built_shapes(table)
    here = {"numerics": here_numerics(table, environment), "batch": batch or here_batch(table),
            "timing": _profiled(profiled), "shapes": shapes,
            "statistic": statistic or here_statistic(table), "GPU": here_gpu(table, environment)}
    there = {"numerics": method.numerics, "batch": method.batch, "timing": _profiled(method.profiled),
             "shapes": method.shapes, "statistic": method.statistic, "GPU": method.gpu}
    differ, same = [], []
    for aspect, value in here.items():
        study_value = there[aspect]
        if value is None and study_value is None:
            continue
        value = value or "not recorded"
        if study_value is not None and value.split(" (")[0] == study_value.split(" (")[0]:
            same.append(f"{aspect} {value}")
        else:
            differ.append(f"{aspect}: {value} here, {study_value or 'not stated'} in the study")
    text = "Method against the study's: " + ("; ".join(differ) if differ else "no departure")
    if same:
        text += f". The same: {'; '.join(same)}"
    return text + "."


def note_beside(study: str, table: pl.DataFrame, **kwargs) -> None:
    """In a report chunk, beside the study's number: the departures, as a note."""
    from . import page

    if not _ok(table).is_empty():   # nothing measured: the section says so already
        page.note(departures(study, table, page.load("environment"), **kwargs))
