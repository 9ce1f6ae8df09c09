import json
import os

import numpy as np
import pytest

from abstraction_cost.data import offline, order, prepared, sources
from abstraction_cost.data.specs import spec


def _splits(n=6, c=3, h=4, w=5, classes=3):
    rng = np.random.default_rng(0)
    make = lambda k: (rng.integers(0, 256, (k, c, h, w), dtype=np.uint8), rng.integers(0, classes, k).astype(np.int64))
    return {"train": make(n), "test": make(n // 2)}


def test_round_trip_keeps_images_labels_and_statistics(tmp_path):
    splits = _splits()
    manifest = prepared.write(tmp_path / "ds", "toy", splits, ["a", "b", "c"], [{"file": "x.tar", "md5": "00"}])
    data = prepared.load(tmp_path / "ds")
    for name in ("train", "test"):
        split = getattr(data, name)
        np.testing.assert_array_equal(split.images, splits[name][0])
        np.testing.assert_array_equal(split.labels, splits[name][1])
    pixels = splits["train"][0].astype(np.float64) / 255
    np.testing.assert_allclose(manifest["mean"], pixels.mean(axis=(0, 2, 3)))
    np.testing.assert_allclose(manifest["std"], pixels.std(axis=(0, 2, 3)))
    # raw files have exactly the documented sizes, readable without Python
    assert (tmp_path / "ds" / "train-images.u8").stat().st_size == 6 * 3 * 4 * 5
    assert (tmp_path / "ds" / "train-labels.i64").stat().st_size == 6 * 8


@pytest.mark.parametrize("bad, message", [
    (lambda s: s["train"][0].astype(np.float32), "expected uint8"),
    (lambda s: s["train"][0][:, :, :2], "image shapes differ"),
])
def test_bad_arrays_are_refused_and_leave_nothing(tmp_path, bad, message):
    splits = _splits()
    splits["train"] = (bad(splits), splits["train"][1])
    with pytest.raises(ValueError, match=message):
        prepared.write(tmp_path / "ds", "toy", splits, ["a", "b", "c"], [])
    assert not (tmp_path / "ds").exists()


def test_labels_outside_the_classes_are_refused(tmp_path):
    splits = _splits(classes=5)
    with pytest.raises(ValueError, match="labels outside 0..2"):
        prepared.write(tmp_path / "ds", "toy", splits, ["a", "b", "c"], [])


def test_missing_dataset_says_why(tmp_path):
    prepared.write_missing(tmp_path / "ds", "mnist", "download failed: x.gz, expected md5 abc")
    with pytest.raises(prepared.MissingDataset, match="mnist: download failed: x.gz, expected md5 abc"):
        prepared.load(tmp_path / "ds")
    assert sorted(p.name for p in (tmp_path / "ds").iterdir()) == ["manifest.json"]


def test_synthetic_is_deterministic_and_has_the_dataset_shape(smoke_config):
    ds = spec("synthetic-voc2012", smoke_config)
    a, b = offline.synthetic(ds, 20, 10), offline.synthetic(ds, 20, 10)
    assert a["train"][0].shape == (20, 3, 32, 32) and a["test"][0].shape == (10, 3, 32, 32)
    np.testing.assert_array_equal(a["train"][0], b["train"][0])
    assert a["train"][1].max() < 20


def test_synthetic_classes_differ_in_signal(smoke_config):
    ds = spec("synthetic-cifar10", smoke_config)
    images, labels = offline.synthetic(ds, 400, 10)["train"]
    means = np.stack([images[labels == k].mean(axis=0) for k in range(2)])
    assert np.abs(means[0] - means[1]).mean() > 10, "class patterns are indistinguishable"


def test_digits_split_and_shape(smoke_config):
    splits = offline.digits(16)
    assert splits["train"][0].shape == (1438, 1, 16, 16) and splits["test"][0].shape == (359, 1, 16, 16)
    assert set(np.unique(splits["test"][1])) == set(range(10))


def test_prepare_applies_limits(tmp_path, smoke_config):
    smoke_config["data"]["limit_train"] = 100
    manifest = sources.prepare("digits", smoke_config, tmp_path / "dl", tmp_path / "out")
    assert manifest["splits"]["train"]["count"] == 100 and manifest["splits"]["test"]["count"] == 359
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["status"] == "ok"


def test_sample_orders_are_permutations_per_epoch(tmp_path):
    order.write(tmp_path / "o.i32", 50, seed=3, epochs=4)
    rows = order.read(tmp_path / "o.i32", 50, 4)
    for row in rows:
        assert sorted(row) == list(range(50))
    assert not np.array_equal(rows[0], rows[1])
    np.testing.assert_array_equal(rows, order.permutations(50, 3, 4))
    with pytest.raises(ValueError, match="expected 5×50"):
        order.read(tmp_path / "o.i32", 50, 5)


def test_manifest_records_every_files_size_and_checksum(tmp_path):
    manifest = prepared.write(tmp_path / "ds", "toy", _splits(), ["a", "b", "c"], [])
    assert manifest["format"] == prepared.FORMAT == 2
    assert sorted(manifest["files"]) == ["test-images.u8", "test-labels.i64", "train-images.u8", "train-labels.i64"]
    record = manifest["files"]["train-images.u8"]
    assert record["bytes"] == 6 * 3 * 4 * 5 and len(record["sha256"]) == 64
    assert prepared.verify(tmp_path / "ds")["dataset"] == "toy" and prepared.check(tmp_path / "ds") is None


def test_truncated_file_is_an_error_naming_it_and_how_to_rebuild(tmp_path):
    splits = _splits(n=4000)
    prepared.write(tmp_path / "ds", "toy", splits, ["a", "b", "c"], [])
    damaged = tmp_path / "ds" / "train-images.u8"
    os.truncate(damaged, 100000)   # as `truncate -s 100000`
    for call in (prepared.load, prepared.verify, prepared.check):
        try:
            message = call(tmp_path / "ds")
        except prepared.DamagedDataset as err:
            message = str(err)
        assert f"{damaged}: 100000 bytes, but {4000 * 60} were written" in message, message
        assert "rebuild it by rerunning snakemake" in message


def test_changed_contents_of_the_same_size_are_found_by_the_checksum(tmp_path):
    prepared.write(tmp_path / "ds", "toy", _splits(), ["a", "b", "c"], [])
    labels = tmp_path / "ds" / "test-labels.i64"
    stat = labels.stat()
    data = bytearray(labels.read_bytes())
    data[0] ^= 1
    labels.write_bytes(bytes(data))
    with pytest.raises(prepared.DamagedDataset, match=r"test-labels.i64: sha256 \w+, but \w+ was written"):
        prepared.load(tmp_path / "ds")
    # the cheap check of every Snakemake start trusts a file whose size and mtime are the recorded ones
    os.utime(labels, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert prepared.check(tmp_path / "ds") is None
    with pytest.raises(prepared.DamagedDataset):
        prepared.verify(tmp_path / "ds")


def test_a_dataset_of_the_older_format_is_verified_by_its_sizes(tmp_path):
    prepared.write(tmp_path / "ds", "toy", _splits(), ["a", "b", "c"], [])
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    del manifest["files"]
    manifest["format"] = 1
    (tmp_path / "ds" / "manifest.json").write_text(json.dumps(manifest))
    assert prepared.check(tmp_path / "ds") is None and prepared.load(tmp_path / "ds").train.images.shape[0] == 6
    os.truncate(tmp_path / "ds" / "test-labels.i64", 8)
    assert "test-labels.i64: 8 bytes, but 24 were written" in prepared.check(tmp_path / "ds")
    manifest["format"] = 7
    (tmp_path / "ds" / "manifest.json").write_text(json.dumps(manifest))
    assert "prepared format 7 is unknown" in prepared.check(tmp_path / "ds")
    assert "unreadable manifest" in prepared.check(tmp_path / "nothing")


def test_a_missing_dataset_verifies_and_says_both_reasons_when_not_run_too(tmp_path):
    prepared.write_missing(tmp_path / "ds", "voc2012", "download failed; to retry: ...")
    assert prepared.check(tmp_path / "ds") is None
    missing = prepared.missing_reason(tmp_path / "ds")
    assert missing == "voc2012: download failed; to retry: ..."
    status, message = prepared.also_missing("not_run", "no CUDA GPU on this machine", missing)
    assert status == "missing" and message.startswith(missing) and message.endswith("no CUDA GPU on this machine")
    assert prepared.also_missing("error", "MissingDataset: x", missing) == ("missing", missing)
