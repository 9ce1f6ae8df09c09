"""Downloads (data/download.py) against a loopback server, and the safe extractor (data/archives.py)."""
from __future__ import annotations

import gzip
import io
import json
import shutil
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from abstraction_cost.data import archives, download
from tests.fixtures import fake_datasets, loopback
from tests.fixtures.repository import REPO


@pytest.fixture
def served(tmp_path):
    """A fake dataset's files in the real URL layout, served over loopback: (fake, base URL, download root)."""
    def start(name, contents=None, truncate_to=None):
        fake = fake_datasets.build(name)
        serve_dir = tmp_path / "served"
        fake_datasets.serve_layout(fake, serve_dir, contents)
        return fake, loopback.serve(serve_dir, truncate_to), tmp_path / "resources" / name
    return start


def _record(name, root, mirror):
    return download.record(name, root, mirror, root / "download.json")


def _leftovers(root):
    return sorted(p.name for p in root.rglob("*") if p.name.endswith(".part") or p.name.startswith(".extract-"))


# --- where URLs and checksums come from -------------------------------------------------------------------

def test_resources_are_torchvisions_own():
    from torchvision.datasets import CIFAR10, MNIST, STL10
    from torchvision.datasets.voc import DATASET_YEAR_DICT

    assert set(download.RESOURCES) == {"mnist", "cifar10", "stl10", "voc2012"}
    assert [(r.file.removeprefix("MNIST/raw/"), r.md5) for r in download.RESOURCES["mnist"]] == \
        [tuple(x) for x in MNIST.resources]
    assert download.RESOURCES["mnist"][0].urls == tuple(m + MNIST.resources[0][0] for m in MNIST.mirrors)
    assert download.RESOURCES["cifar10"] == (download.Resource(CIFAR10.filename, CIFAR10.tgz_md5, (CIFAR10.url,)),)
    assert download.RESOURCES["stl10"][0].md5 == STL10.tgz_md5
    voc = DATASET_YEAR_DICT["2012"]
    assert download.RESOURCES["voc2012"][0] == download.Resource(voc["filename"], voc["md5"], (voc["url"],))


def test_mirror_replaces_scheme_and_host_only():
    url = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    assert download.mirrored(url, None) == url
    assert download.mirrored(url, "http://127.0.0.1:8000") == "http://127.0.0.1:8000/~kriz/cifar-10-python.tar.gz"
    assert download.mirrored(url, "http://m.example/data/") == "http://m.example/data/~kriz/cifar-10-python.tar.gz"
    with pytest.raises(ValueError, match="data.mirror"):
        download.mirrored(url, "ftp://m.example")


def test_config_schema_accepts_mirror_and_rejects_non_http():
    from abstraction_cost import config as config_module

    config = config_module.load(REPO / "config" / "smoke.yaml")
    assert config["data"]["mirror"] is None
    config["data"]["mirror"] = "http://127.0.0.1:8000/datasets"
    config_module.validate(config)
    config["data"]["mirror"] = "/srv/mirror"
    with pytest.raises(config_module.ConfigError, match="data.mirror"):
        config_module.validate(config)


# --- successful downloads -----------------------------------------------------------------------------------

def test_download_verifies_extracts_and_records(served, monkeypatch):
    fake, server, root = served("cifar10")
    fake_datasets.use_fake_md5s(monkeypatch, fake)
    with server as mirror:
        result = _record("cifar10", root, mirror)
    expected_md5 = fake_datasets.md5(fake.files["cifar-10-python.tar.gz"])
    assert result == {"status": "ok", "message": None,
                      "files": [{"file": "cifar-10-python.tar.gz", "md5": expected_md5}]}
    assert json.loads((root / "download.json").read_text()) == result
    assert (root / "cifar-10-python.tar.gz").read_bytes() == fake.files["cifar-10-python.tar.gz"]
    assert sorted(p.name for p in (root / "cifar-10-batches-py").iterdir()) == \
        ["batches.meta", "data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5",
         "readme.html", "test_batch"]
    assert _leftovers(root) == []


def test_mnist_falls_back_to_its_second_mirror(served, monkeypatch, tmp_path):
    fake, server, root = served("mnist")
    fake_datasets.use_fake_md5s(monkeypatch, fake)
    # move the files from the first mirror's path (/mnist/) to the second's (/exdb/mnist/)
    first, second = (tmp_path / "served" / "mnist"), (tmp_path / "served" / "exdb" / "mnist")
    second.parent.mkdir(parents=True)
    first.rename(second)
    with server as mirror:
        result = _record("mnist", root, mirror)
    assert result["status"] == "ok", result["message"]
    assert sorted(p.name for p in (root / "MNIST" / "raw").iterdir() if not p.name.endswith(".extracted")) == sorted(
        [n for f in fake.files for n in (f.split("/")[-1], f.split("/")[-1].removesuffix(".gz"))])


def test_present_archive_with_right_md5_is_not_downloaded(served, monkeypatch):
    fake, _, root = served("stl10")
    fake_datasets.use_fake_md5s(monkeypatch, fake)
    root.mkdir(parents=True)
    (root / "stl10_binary.tar.gz").write_bytes(fake.files["stl10_binary.tar.gz"])  # pre-seeded resources/
    result = _record("stl10", root, loopback.refused_url())   # no server: any download attempt would fail
    assert result["status"] == "ok", result["message"]
    assert (root / "stl10_binary" / "train_X.bin").is_file()


def test_extraction_is_skipped_when_stamped_and_redone_when_tree_is_gone(served, monkeypatch):
    fake, server, root = served("cifar10")
    fake_datasets.use_fake_md5s(monkeypatch, fake)
    with server as mirror:
        _record("cifar10", root, mirror)
    marker = root / "cifar-10-batches-py" / "marker"
    marker.write_text("kept")
    download.fetch("cifar10", root, loopback.refused_url())
    assert marker.exists()          # the stamp matched: not extracted again
    shutil.rmtree(root / "cifar-10-batches-py")
    download.fetch("cifar10", root, loopback.refused_url())
    assert (root / "cifar-10-batches-py" / "test_batch").is_file()


# --- failures become a failed record, with nothing partial left --------------------------------------------

def _assert_failed(result, root, file, md5):
    assert result["status"] == "failed" and result["files"] == []
    assert file in result["message"] and md5 in result["message"]
    assert json.loads((root / "download.json").read_text()) == result
    assert not (root / file).exists()
    assert _leftovers(root) == []


def test_corrupted_archive_names_file_and_expected_md5_and_leaves_nothing(served, monkeypatch, caplog):
    fake = fake_datasets.build("cifar10")
    corrupted = bytearray(fake.files["cifar-10-python.tar.gz"])
    corrupted[100] ^= 0xFF
    _, server, root = served("cifar10", contents={"cifar-10-python.tar.gz": bytes(corrupted)})
    fake_datasets.use_fake_md5s(monkeypatch, fake)
    expected = fake_datasets.md5(fake.files["cifar-10-python.tar.gz"])
    with server as mirror, caplog.at_level("ERROR"):
        result = _record("cifar10", root, mirror)
    _assert_failed(result, root, "cifar-10-python.tar.gz", expected)
    assert fake_datasets.md5(bytes(corrupted)) in result["message"]   # what it got, too
    assert any(r.levelname == "ERROR" and expected in r.getMessage() for r in caplog.records)
    assert not (root / "cifar-10-batches-py").exists()


def test_interrupted_download_is_removed(served, monkeypatch):
    fake, server, root = served("stl10", truncate_to=0.5)
    fake_datasets.use_fake_md5s(monkeypatch, fake)
    with server as mirror:
        result = _record("stl10", root, mirror)
    _assert_failed(result, root, "stl10_binary.tar.gz", fake_datasets.md5(fake.files["stl10_binary.tar.gz"]))


def test_connection_refused_is_recorded(tmp_path):
    root = tmp_path / "voc2012"
    mirror = loopback.refused_url()
    result = _record("voc2012", root, mirror)
    resource = download.RESOURCES["voc2012"][0]
    _assert_failed(result, root, resource.file, resource.md5)   # torchvision's own md5 when not patched
    assert mirror in result["message"]


def test_wrong_present_file_is_replaced_by_a_verified_download(served, monkeypatch):
    fake, server, root = served("cifar10")
    fake_datasets.use_fake_md5s(monkeypatch, fake)
    root.mkdir(parents=True)
    (root / "cifar-10-python.tar.gz").write_bytes(b"stale")
    with server as mirror:
        assert _record("cifar10", root, mirror)["status"] == "ok"
    assert (root / "cifar-10-python.tar.gz").read_bytes() == fake.files["cifar-10-python.tar.gz"]


def test_unsafe_archive_with_right_md5_is_recorded_failed(served, monkeypatch, tmp_path):
    evil = fake_datasets.tar_bytes({"cifar-10-batches-py/data_batch_1": b"x", "../../evil": b"owned"}, compress=True)
    fake = fake_datasets.FakeDataset("cifar10", {"cifar-10-python.tar.gz": evil}, {})
    _, server, root = served("cifar10", contents=fake.files)
    fake_datasets.use_fake_md5s(monkeypatch, fake)
    with server as mirror:
        result = _record("cifar10", root, mirror)
    assert result["status"] == "failed"
    assert "cifar-10-python.tar.gz" in result["message"] and "../../evil" in result["message"]
    assert not list(tmp_path.rglob("evil")) and not (root / "cifar-10-batches-py").exists()
    assert _leftovers(root) == []


def test_unknown_dataset_is_a_key_error(tmp_path):
    with pytest.raises(KeyError, match="synthetic-mnist"):
        download.fetch("synthetic-mnist", tmp_path)


def test_patched_md5_seam_is_the_only_place(monkeypatch, served):
    """Replacing RESOURCES entries is enough: no other copy of torchvision's md5 is consulted."""
    fake, server, root = served("mnist")
    wrong = tuple(replace(r, md5="0" * 32) for r in download.RESOURCES["mnist"])
    monkeypatch.setitem(download.RESOURCES, "mnist", wrong)
    with server as mirror:
        result = _record("mnist", root, mirror)
    assert result["status"] == "failed" and "0" * 32 in result["message"]


# --- the safe extractor ---------------------------------------------------------------------------------------

def _tar(tmp_path, members, name="a.tar"):
    """members: list of (TarInfo kwargs, data or None)."""
    path = tmp_path / name
    with tarfile.open(path, "w") as tar:
        for fields, data in members:
            info = tarfile.TarInfo(fields.pop("name"))
            for key, value in fields.items():
                setattr(info, key, value)
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _reg(name, data=b"data"):
    return {"name": name}, data


@pytest.mark.parametrize("members, bad", [
    ([_reg("ok/file"), _reg("../evil")], "../evil"),
    ([_reg("ok/file"), _reg("ok/../../evil")], "ok/../../evil"),
    ([_reg("/tmp/evil")], "/tmp/evil"),
    ([({"name": "link", "type": tarfile.SYMTYPE, "linkname": "../.."}, None), _reg("link/evil")], "link"),
    ([({"name": "link", "type": tarfile.SYMTYPE, "linkname": "/etc/passwd"}, None)], "link"),
    ([({"name": "d/link", "type": tarfile.SYMTYPE, "linkname": "../../x"}, None)], "d/link"),
    ([({"name": "hard", "type": tarfile.LNKTYPE, "linkname": "../outside"}, None)], "hard"),
    ([({"name": "dev", "type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3}, None)], "dev"),
    ([({"name": "fifo", "type": tarfile.FIFOTYPE}, None)], "fifo"),
])
def test_unsafe_members_are_rejected_naming_archive_and_member(tmp_path, members, bad):
    archive = _tar(tmp_path, members)
    target = tmp_path / "target"
    with pytest.raises(archives.UnsafeArchive) as err:
        archives.extract(archive, target)
    assert str(archive) in str(err.value) and repr(bad) in str(err.value)
    assert list(target.iterdir()) == []                       # nothing extracted, no temporary left
    assert not (tmp_path / "evil").exists() and not (tmp_path.parent / "evil").exists()


def test_links_inside_the_tree_become_copies(tmp_path):
    archive = _tar(tmp_path, [
        _reg("d/file", b"payload"),
        ({"name": "d/sym", "type": tarfile.SYMTYPE, "linkname": "file"}, None),
        ({"name": "top", "type": tarfile.SYMTYPE, "linkname": "d/sym"}, None),     # a link to a link
        ({"name": "hard", "type": tarfile.LNKTYPE, "linkname": "d/file"}, None),
    ])
    target = tmp_path / "target"
    assert archives.extract(archive, target) == ["d", "hard", "top"]
    for path in (target / "d" / "sym", target / "top", target / "hard"):
        assert not path.is_symlink() and path.read_bytes() == b"payload"


def test_link_to_a_member_that_is_not_a_file_is_rejected(tmp_path):
    archive = _tar(tmp_path, [({"name": "d", "type": tarfile.DIRTYPE}, None),
                              ({"name": "sym", "type": tarfile.SYMTYPE, "linkname": "d"}, None)])
    with pytest.raises(archives.ArchiveError, match="'sym' points to 'd'"):
        archives.extract(archive, tmp_path / "target")


def test_modes_come_from_us_not_the_archive(tmp_path):
    archive = _tar(tmp_path, [({"name": "setuid", "mode": 0o4777}, b"x")])
    archives.extract(archive, tmp_path / "target")
    assert (tmp_path / "target" / "setuid").stat().st_mode & 0o7777 == 0o644


def test_extraction_replaces_an_older_tree(tmp_path):
    target = tmp_path / "target"
    (target / "d").mkdir(parents=True)
    (target / "d" / "old").write_text("old")
    archives.extract(_tar(tmp_path, [_reg("d/new")]), target)
    assert sorted(p.name for p in (target / "d").iterdir()) == ["new"]


def test_gzip_single_file_and_truncated_archives(tmp_path):
    good = tmp_path / "x-idx1-ubyte.gz"
    good.write_bytes(gzip.compress(b"abc" * 1000))
    assert archives.extract(good, tmp_path / "out") == ["x-idx1-ubyte"]
    assert (tmp_path / "out" / "x-idx1-ubyte").read_bytes() == b"abc" * 1000
    truncated = tmp_path / "t-idx1-ubyte.gz"
    truncated.write_bytes(gzip.compress(bytes(range(256)) * 400)[:-40])
    with pytest.raises(archives.ArchiveError, match="t-idx1-ubyte.gz"):
        archives.extract(truncated, tmp_path / "out2")
    assert list((tmp_path / "out2").iterdir()) == []
    tgz = tmp_path / "t.tar.gz"
    tgz.write_bytes(fake_datasets.tar_bytes({"a": b"1" * 5000, "b": b"2" * 5000}, compress=True)[:-30])
    with pytest.raises(archives.ArchiveError, match="t.tar.gz"):
        archives.extract(tgz, tmp_path / "out3")
    assert list((tmp_path / "out3").iterdir()) == []


def test_unknown_archive_kind(tmp_path):
    with pytest.raises(archives.ArchiveError, match="a.zip"):
        archives.extract(tmp_path / "a.zip", tmp_path / "out")
