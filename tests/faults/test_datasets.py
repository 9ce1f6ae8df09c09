"""Scenario 7: a corrupt, truncated or wrong-checksum dataset archive, and one with a path-traversal or link
member. The dataset is recorded missing with why and how to retry; nothing is extracted outside its folder."""
import io
import tarfile

import pytest

from abstraction_cost import tables
from abstraction_cost.data import download
from tests.fixtures import fake_datasets, loopback

from .conftest import INIT, faults_config

CIFAR_ROWS = f"results/study_a/train/eager/cifar10/{INIT}/seed0.rows.parquet"
ARCHIVE = "cifar-10-python.tar.gz"


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "wrong-checksum"])
def test_bad_archive_is_recorded_missing_with_the_way_to_retry(work, tmp_path, damage):
    served = tmp_path / "served"
    fake = fake_datasets.cifar10()
    contents = {ARCHIVE: b"\x1f\x8b not a gzip stream" * 100} if damage == "corrupt" else fake.files
    fake_datasets.serve_layout(fake, served, contents)
    if damage == "wrong-checksum":   # a file already in resources/ that is not the one its checksum names
        (work.path / "resources" / "cifar10").mkdir(parents=True)
        (work.path / "resources" / "cifar10" / ARCHIVE).write_bytes(fake.files[ARCHIVE])
    config = faults_config()
    config["study_a"]["training"]["datasets"] = ["cifar10"]
    with loopback.serve(served, truncate_to=0.5 if damage == "truncated" else None) as mirror:
        config["data"]["mirror"] = mirror
        work.write_config(config)
        first = work.snakemake(CIFAR_ROWS)
    assert first.returncode == 0, first.output[-4000:]   # the pipeline goes on without the dataset
    rows = tables.read("training", work.path / CIFAR_ROWS)
    assert rows["status"].to_list() == ["missing"]
    message = rows["message"][0]
    assert ARCHIVE in message and "md5" in message, message                     # the cause ...
    assert "resources/cifar10/download.json" in message and "delete" in message, message   # ... and the fix
    root = work.path / "resources" / "cifar10"
    assert not [p for p in root.iterdir() if p.suffix == ".part" or p.name == "cifar-10-batches-py"]
    again = work.snakemake(CIFAR_ROWS)
    assert again.returncode == 0 and work.jobs_run(again.output) == []


def _tar(add) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        add(tar)
    return buf.getvalue()


def _member(tar, name, data=b"x"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _link(tar, name, target, kind=tarfile.SYMTYPE):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    tar.addfile(info)


UNSAFE = {
    "path-traversal": (lambda t: (_member(t, "cifar-10-batches-py/data_batch_1"), _member(t, "../../evil")),
                       "../../evil"),
    "symlink-out": (lambda t: _link(t, "cifar-10-batches-py/data_batch_1", "/etc/passwd"), "/etc/passwd"),
    "hardlink-out": (lambda t: _link(t, "cifar-10-batches-py/x", "../../outside", tarfile.LNKTYPE), "outside"),
}


@pytest.mark.parametrize("kind", UNSAFE)
def test_unsafe_archive_member_is_refused(tmp_path, monkeypatch, kind):
    add, named = UNSAFE[kind]
    archive = _tar(add)
    served, root = tmp_path / "served", tmp_path / "work" / "resources" / "cifar10"
    fake = fake_datasets.FakeDataset("cifar10", {ARCHIVE: archive}, {})
    fake_datasets.serve_layout(fake, served)
    fake_datasets.use_fake_md5s(monkeypatch, fake)   # the archive matches its checksum: only its members are bad
    record = root / "download.json"
    with loopback.serve(served) as mirror:
        result = download.record("cifar10", root, mirror, record)
    assert result["status"] == "failed"
    assert ARCHIVE in result["message"] and named in result["message"], result["message"]
    assert not list(tmp_path.rglob("evil")) and not list(tmp_path.rglob("outside"))
    assert not (root / "cifar-10-batches-py").exists()
