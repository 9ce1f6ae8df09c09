"""Eager training on the GPU: CUDA-event times and NVML columns filled (run on the GPU machine)."""
from types import SimpleNamespace

import pytest

from abstraction_cost import tables
from abstraction_cost.data import offline, order, prepared
from abstraction_cost.models import init, resnet, weights_file
from abstraction_cost.study_a import eager
from abstraction_cost.study_a.training import job as training_job


@pytest.mark.gpu
def test_eager_training_on_the_gpu_fills_every_measure(tmp_path, smoke_config):
    smoke_config.update(device="cuda")
    smoke_config["measure"]["nvml_interval_ms"] = 20
    smoke_config["study_a"]["training"].update(require_gpu=True, epochs=2, batch_size=64)
    prepared.write(tmp_path / "data", "digits", offline.digits(28), [str(d) for d in range(10)], [])
    data = prepared.load(tmp_path / "data")
    order.write(tmp_path / "o.i32", len(data.train.labels), 0, 2)
    weights_file.save(init.initialise(resnet.resnet50(1, 10), "kaiming-normal-fan-out", 0).state_dict(),
                      tmp_path / "w.weights")
    items = {"dataset": "digits", "init": "kaiming-normal-fan-out", "seed": "0"}
    snakemake = SimpleNamespace(
        config=smoke_config, rule="train_eager", wildcards=SimpleNamespace(**items, items=items.items),
        input=SimpleNamespace(data=str(tmp_path / "data"), order=str(tmp_path / "o.i32"),
                              weights=str(tmp_path / "w.weights")),
        output=SimpleNamespace(table=str(tmp_path / "rows.parquet"), env=str(tmp_path / "env.parquet")))

    def trainer(run, data, order_, weights_path, settings):
        model = weights_file.load_into(resnet.resnet50(1, 10), weights_path)
        return eager.train(model, data, order_, settings, run)

    training_job.run(snakemake, "eager", trainer)
    rows = tables.read("training", tmp_path / "rows.parquet")
    env = tables.read("environment", tmp_path / "env.parquet")
    assert (rows["status"] == "ok").all() and (rows["device"] == "cuda").all(), rows["message"].to_list()
    assert env["nvml_status"][0] == "ok" and env["gpu_name"][0]
    assert env["sm_clock_mhz_before"][0] is not None and env["throttle_reasons_after"][0]
    for column in ("mem_used_mib_max", "gpu_util_mean_pct", "alloc_peak_mib", "power_w_mean"):
        assert rows[column].null_count() == 0, column
    assert (rows["nvml_samples"] > 0).all()
    # the step events cover only the timed steps, so they never exceed the phase's wall-clock time
    assert (rows["time_s"] <= rows["wall_s"] * 1.01).all()
