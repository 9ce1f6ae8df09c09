"""Readers of the real datasets (data/real.py): download + prepare round trips on fake archives of the real
layout, PASCAL's first-object labels and split files, and the download -> prepare rule chain offline."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from abstraction_cost.data import download, prepared, real, sources
from abstraction_cost.data.specs import VOC_CLASSES, spec
from tests.fixtures import fake_datasets, loopback
from tests.fixtures.repository import REPO

VOC_RESOLUTION = 16


def _config(**data) -> dict:
    config = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config["data"].update({"limit_train": None, "limit_test": None, "voc_resolution": VOC_RESOLUTION}, **data)
    return config


def _fetch(name, tmp_path, monkeypatch):
    fake = fake_datasets.build(name, VOC_RESOLUTION)
    fake_datasets.serve_layout(fake, tmp_path / "served")
    fake_datasets.use_fake_md5s(monkeypatch, fake)
    root = tmp_path / "resources" / name
    with loopback.serve(tmp_path / "served") as mirror:
        result = download.record(name, root, mirror, root / "download.json")
    assert result["status"] == "ok", result["message"]
    return fake, root


def _assert_splits_equal(name, got, expected):
    assert sorted(got) == ["test", "train"]
    for split, (images, labels) in expected.items():
        got_images, got_labels = got[split]
        assert got_images.dtype == np.uint8 and got_labels.dtype == np.int64
        assert got_images.shape == images.shape and got_images.flags.c_contiguous
        np.testing.assert_array_equal(got_labels, labels)
        if name == "voc2012":   # JPEG: a flat colour survives within a few levels
            assert np.abs(got_images.astype(int) - images.astype(int)).max() <= 3
        else:
            np.testing.assert_array_equal(got_images, images)


@pytest.mark.parametrize("name", ["mnist", "cifar10", "stl10", "voc2012"])
def test_download_and_prepare_round_trip(name, tmp_path, monkeypatch):
    fake, root = _fetch(name, tmp_path, monkeypatch)
    config = _config()
    _assert_splits_equal(name, real.load(spec(name, config), root), fake.expected)

    manifest = sources.prepare(name, config, root, tmp_path / "prepared" / name)
    assert manifest["status"] == "ok"
    assert manifest["sources"] == json.loads((root / "download.json").read_text())["files"]
    ds = prepared.load(tmp_path / "prepared" / name)
    _assert_splits_equal(name, {"train": (np.asarray(ds.train.images), ds.train.labels),
                                "test": (np.asarray(ds.test.images), ds.test.labels)}, fake.expected)
    assert ds.classes == spec(name, config).classes


def test_voc_labels_are_the_first_objects_class_and_splits_follow_the_list_files(tmp_path, monkeypatch):
    _, root = _fetch("voc2012", tmp_path, monkeypatch)
    splits = real.load(spec("voc2012", _config()), root)
    names = {split: [VOC_CLASSES[i] for i in labels] for split, (_, labels) in splits.items()}
    # train.txt: dog+person, aeroplane, tvmonitor+dog+cat; val.txt: person+horse, bicycle; 2008_000006 unlisted
    assert names == {"train": ["dog", "aeroplane", "tvmonitor"], "test": ["person", "bicycle"]}
    assert splits["train"][0].shape == (3, 3, VOC_RESOLUTION, VOC_RESOLUTION)
    assert tuple(splits["train"][0][0, :, 5, 5]) == pytest.approx((200, 30, 30), abs=3)  # RGB order kept


def test_voc_resolution_is_config(tmp_path, monkeypatch):
    _, root = _fetch("voc2012", tmp_path, monkeypatch)
    images, _ = real.load(spec("voc2012", _config(voc_resolution=40)), root)["test"]
    assert images.shape == (2, 3, 40, 40)


def test_voc_annotation_errors_name_the_file(tmp_path):
    bad = tmp_path / "unknown.xml"
    bad.write_bytes(fake_datasets.voc_annotation("x", ["unicorn", "dog"]))
    with pytest.raises(ValueError, match="unknown.xml.*'unicorn'"):
        real.voc_first_object_label(bad)
    empty = tmp_path / "empty.xml"
    empty.write_bytes(fake_datasets.voc_annotation("x", []))
    with pytest.raises(ValueError, match="empty.xml.*no <object>"):
        real.voc_first_object_label(empty)
    padded = tmp_path / "padded.xml"
    padded.write_bytes(fake_datasets.voc_annotation("x", [" \n sheep \n", "dog"]))
    assert real.voc_first_object_label(padded) == VOC_CLASSES.index("sheep")


def test_prepare_limits_apply_to_real_datasets(tmp_path, monkeypatch):
    _, root = _fetch("cifar10", tmp_path, monkeypatch)
    manifest = sources.prepare("cifar10", _config(limit_train=4, limit_test=2), root, tmp_path / "p")
    assert {k: v["count"] for k, v in manifest["splits"].items()} == {"train": 4, "test": 2}


def test_truncated_idx_file_is_named(tmp_path, monkeypatch):
    _, root = _fetch("mnist", tmp_path, monkeypatch)
    path = root / "MNIST" / "raw" / "t10k-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError, match="t10k-images-idx3-ubyte.*header says"):
        real.load(spec("mnist", _config()), root)


def test_cifar_unpickler_refuses_anything_but_numpy(tmp_path, monkeypatch):
    _, root = _fetch("cifar10", tmp_path, monkeypatch)
    (root / "cifar-10-batches-py" / "test_batch").write_bytes(pickle.dumps({"data": os.system}))
    with pytest.raises(pickle.UnpicklingError, match="system"):
        real.load(spec("cifar10", _config()), root)


def test_real_load_rejects_offline_datasets(tmp_path):
    with pytest.raises(KeyError, match="synthetic-mnist"):
        real.load(spec("synthetic-mnist", _config()), tmp_path)


def test_rule_chain_offline_records_failed_download_and_missing_dataset(tmp_path):
    """download_dataset -> prepare_dataset through snakemake with the mirror on a port nothing listens on."""
    config = _config(mirror=loopback.refused_url())
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    # only the data rules: the chain under test, independent of the other experiments' rules files
    rules = REPO / "workflow" / "rules"
    (tmp_path / "Snakefile").write_text(f'include: "{rules / "common.smk"}"\ninclude: "{rules / "data.smk"}"\n')
    snakemake = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or "snakemake"
    run = subprocess.run(
        [snakemake, "--snakefile", str(tmp_path / "Snakefile"), "--directory", str(tmp_path),
         "--configfile", str(tmp_path / "config.yaml"), "--workflow-profile", "none", "--cores", "1",
         "--quiet", "all", "--", "results/data/prepared/cifar10"],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    record = json.loads((tmp_path / "resources" / "cifar10" / "download.json").read_text())
    assert record["status"] == "failed" and record["files"] == []
    assert "cifar-10-python.tar.gz" in record["message"] and download.RESOURCES["cifar10"][0].md5 in record["message"]
    manifest = prepared.read_manifest(tmp_path / "results" / "data" / "prepared" / "cifar10")
    assert manifest["status"] == "missing" and manifest["message"] == record["message"]
    files = set(os.listdir(tmp_path / "results" / "data" / "prepared" / "cifar10")) - {".snakemake_timestamp"}
    assert files == {"manifest.json"}    # no data files that could look prepared
    with pytest.raises(prepared.MissingDataset, match="cifar-10-python.tar.gz"):
        prepared.load(tmp_path / "results" / "data" / "prepared" / "cifar10")
    log = (tmp_path / "logs" / "data" / "download-cifar10.log").read_text()
    assert "ERROR" in log and "cifar-10-python.tar.gz" in log
    assert not list((tmp_path / "resources").rglob("*.part"))
