"""The report's note under a comparison table whose rows came from more than one GPU (report/gpus.py)."""
import polars as pl

from abstraction_cost.report import gpus

from tests.fixtures.report_rows import environment_rows


def on_gpus(placement, names=None):
    """Environment rows of run r0, r1, ... on the given GPU indices (UUIDs follow the index)."""
    env = environment_rows([f"r{i}" for i in range(len(placement))])
    return env.with_columns(gpu_index=pl.Series(placement, dtype=pl.Int64),
                            gpu_uuid=pl.Series([f"GPU-{i}" for i in placement]),
                            gpu_name=pl.Series(names or ["NVIDIA H200"] * len(placement)))


def test_rows_from_one_gpu_get_no_note():
    table = pl.DataFrame({"run_id": ["r0", "r1"], "speedup": [1.0, 2.0]})
    assert gpus.measured_on_note(table, on_gpus([1, 1])) is None


def test_rows_from_two_gpus_of_one_model_are_named():
    table = pl.DataFrame({"run_id": ["r0", "r1", "r2"]})
    note = gpus.measured_on_note(table, on_gpus([0, 1, 1]))
    assert note.startswith("Measured on 2 GPUs (GPU 0, GPU 1) of one model (NVIDIA H200)")
    assert "gpus.pin_comparisons: true" in note


def test_a_derived_rows_run_ids_each_count():
    table = pl.DataFrame({"run_id": ["r0,r2"]})  # one speedup from two jobs
    assert "2 GPUs (GPU 0, GPU 3)" in gpus.measured_on_note(table, on_gpus([0, 1, 3]))
    assert gpus.measured_on_note(pl.DataFrame({"run_id": ["r1"]}), on_gpus([0, 1, 3])) is None


def test_gpus_of_different_models_are_not_comparable():
    note = gpus.measured_on_note(pl.DataFrame({"run_id": ["r0", "r1"]}),
                                 on_gpus([0, 1], names=["NVIDIA H100", "NVIDIA H200"]))
    assert "different models (NVIDIA H100, NVIDIA H200): rows of different GPUs are not comparable" in note


def test_cpu_rows_and_empty_tables_get_no_note():
    cpu = on_gpus([0, 1]).with_columns(gpu_uuid=pl.lit(None, pl.String), gpu_index=pl.lit(None, pl.Int64))
    assert gpus.measured_on_note(pl.DataFrame({"run_id": ["r0", "r1"]}), cpu) is None
    assert gpus.measured_on_note(pl.DataFrame({"run_id": []}, schema={"run_id": pl.String}), on_gpus([0, 1])) is None
