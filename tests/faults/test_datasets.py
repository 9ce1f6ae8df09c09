"""Scenario 7: a corrupt, truncated or wrong-checksum dataset archive, and one with a path-traversal or link
member. The dataset is recorded missing with why and how to retry; nothing is extracted outside its folder.
Scenario 13: the retry the message gives tries the download again. Scenario 14: a damaged prepared file."""
import io
import os
import re
import tarfile

import pytest

from abstraction_cost import tables
from abstraction_cost.data import download, prepared
from tests.fixtures import fake_datasets, loopback

from .conftest import DATASET, EAGER_ROWS, INIT, faults_config

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
    assert "--forcerun resources/cifar10/download.json" in message, message   # ... and the fix
    root = work.path / "resources" / "cifar10"
    assert not [p for p in root.iterdir() if p.suffix == ".part" or p.name == "cifar-10-batches-py"]
    again = work.snakemake(CIFAR_ROWS)
    assert again.returncode == 0 and work.jobs_run(again.output) == []


def test_the_retry_the_message_gives_downloads_again(work, tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    config = faults_config()
    config["study_a"]["training"]["datasets"] = ["cifar10"]
    with loopback.serve(served) as mirror:   # nothing served yet: 404
        config["data"]["mirror"] = mirror
        work.write_config(config)
        first = work.snakemake(CIFAR_ROWS)
        assert first.returncode == 0, first.output[-4000:]
        message = tables.read("training", work.path / CIFAR_ROWS)["message"][0]
        assert "HTTP Error 404" in message, message
        retry = re.search(r"`snakemake --cores all (--forcerun \S+)`", message)
        assert retry, message
        # the source fixed (the archive now served, here not the real one), then the message's command
        fake_datasets.serve_layout(fake_datasets.cifar10(), served)
        again = work.snakemake(CIFAR_ROWS, *retry.group(1).split())
    assert again.returncode == 0, again.output[-4000:]
    assert {"download_dataset", "prepare_dataset", "train_eager"} <= set(work.jobs_run(again.output))
    message = tables.read("training", work.path / CIFAR_ROWS)["message"][0]
    assert "HTTP Error 404" not in message and "(corrupted or truncated)" in message, message   # fetched anew


def test_a_damaged_prepared_file_is_rebuilt_by_a_plain_rerun(work):
    first = work.snakemake(EAGER_ROWS)
    assert first.returncode == 0, first.output[-4000:]
    folder = work.path / "results" / "data" / "prepared" / DATASET
    damaged = folder / "train-images.u8"
    written = damaged.stat().st_size
    os.truncate(damaged, 100000)   # as `truncate -s 100000`
    with pytest.raises(prepared.DamagedDataset, match=f"{damaged}: 100000 bytes, but {written} were written"):
        prepared.load(folder)
    again = work.snakemake(EAGER_ROWS)
    assert again.returncode == 0, again.output[-4000:]
    shown = damaged.relative_to(work.path)   # Snakemake's start names it from its working directory
    assert (f"{shown}: 100000 bytes, but {written} were written (truncated or overwritten): this run prepares "
            f"{shown.parent} again") in again.output
    assert {"prepare_dataset", "train_eager"} <= set(work.jobs_run(again.output))
    assert prepared.load(folder).train.images.nbytes == written
    assert (tables.read("training", work.path / EAGER_ROWS)["status"] == "ok").all()


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
