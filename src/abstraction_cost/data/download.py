"""Downloads of the real datasets through torchvision's download machinery, checksums verified.

URLs and md5s are torchvision's own (the dataset classes' attributes), gathered once into RESOURCES: the one
place that holds them (tests replace entries there to serve archives of their own). Files keep torchvision's
layout under the dataset's download directory, so a directory torchvision filled can be reused as is:

    mnist     MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz  -> the same names without .gz
    cifar10   cifar-10-python.tar.gz                                     -> cifar-10-batches-py/
    stl10     stl10_binary.tar.gz                                        -> stl10_binary/
    voc2012   VOCtrainval_11-May-2012.tar                                -> VOCdevkit/VOC2012/

A file already present with the right md5 is not downloaded again (resources/ can be pre-seeded). A download
goes to `<file>.part` and is renamed only once its md5 matches; any failure removes the .part file and raises
DownloadError naming the file and the md5 it should have had. `data.mirror` replaces scheme and host of every
URL. record() is what the download rule runs: it turns a failure into download.json {"status": "failed"} so
that the rest of the pipeline goes on and reports the dataset as missing.
"""
from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from torchvision.datasets.utils import calculate_md5, download_url

from . import archives

log = logging.getLogger(__name__)

# A stalled connection fails after this long instead of hanging the rule forever.
SOCKET_TIMEOUT_S = 60.0


class DownloadError(RuntimeError):
    """A file that could not be downloaded with the expected checksum; the message names file and md5."""


@dataclass(frozen=True)
class Resource:
    file: str               # path relative to the dataset's download directory (torchvision's layout)
    md5: str                # of the file as downloaded
    urls: tuple[str, ...]   # tried in order until one gives the right md5


def _torchvision_resources() -> dict[str, tuple[Resource, ...]]:
    from torchvision.datasets import CIFAR10, MNIST, STL10
    from torchvision.datasets.voc import DATASET_YEAR_DICT

    voc = DATASET_YEAR_DICT["2012"]
    return {
        "mnist": tuple(Resource(f"MNIST/raw/{name}", md5, tuple(mirror + name for mirror in MNIST.mirrors))
                       for name, md5 in MNIST.resources),
        "cifar10": (Resource(CIFAR10.filename, CIFAR10.tgz_md5, (CIFAR10.url,)),),
        "stl10": (Resource(STL10.filename, STL10.tgz_md5, (STL10.url,)),),
        "voc2012": (Resource(voc["filename"], voc["md5"], (voc["url"],)),),
    }


RESOURCES: dict[str, tuple[Resource, ...]] = _torchvision_resources()


def mirrored(url: str, mirror: str | None) -> str:
    """`url` with its scheme and host replaced by the base URL `mirror` (config data.mirror); None keeps it."""
    if mirror is None:
        return url
    base = urlsplit(mirror)
    if base.scheme not in ("http", "https") or not base.netloc:
        raise ValueError(f"config key 'data.mirror': {mirror!r} is not an http(s) base URL "
                         "such as 'http://mirror.example.org' or 'http://127.0.0.1:8000/datasets'")
    parts = urlsplit(url)
    return urlunsplit((base.scheme, base.netloc, base.path.rstrip("/") + parts.path, parts.query, ""))


@contextlib.contextmanager
def _socket_timeout(seconds: float):
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds if previous is None else previous)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


def ensure_file(resource: Resource, root: Path, mirror: str | None) -> None:
    """Make root/resource.file exist with resource.md5, downloading it if needed."""
    dest = root / resource.file
    if dest.is_file():
        actual = calculate_md5(dest)
        if actual == resource.md5:
            log.info("%s: present, md5 %s verified; not downloaded", dest, actual)
            return
        log.warning("%s: present but md5 %s, expected %s; downloading it again", dest, actual, resource.md5)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    failures = []
    for url in dict.fromkeys(mirrored(u, mirror) for u in resource.urls):
        part.unlink(missing_ok=True)  # torchvision skips a download whose file exists: never reuse a stale part
        log.info("%s: downloading %s", dest, url)
        try:
            download_url(url, str(part.parent), filename=part.name, md5=None)
        except (OSError, http.client.HTTPException, RecursionError, ValueError) as err:
            part.unlink(missing_ok=True)
            failures.append(f"{url}: {type(err).__name__}: {err}")
            continue
        size, actual = part.stat().st_size, calculate_md5(part)
        if actual != resource.md5:
            part.unlink()
            failures.append(f"{url}: got {size} bytes with md5 {actual} (corrupted or truncated)")
            continue
        os.replace(part, dest)
        log.info("%s: %d bytes, md5 %s verified", dest, size, actual)
        return
    raise DownloadError(f"{dest}: download failed, expected md5 {resource.md5}; no partial file is kept. "
                        + "; ".join(failures))


def _extract_once(archive: Path, md5: str) -> None:
    """Extract a verified archive beside itself, unless a stamp says this very archive was extracted there."""
    stamp = archive.with_name(archive.name + ".extracted")
    if stamp.is_file():
        done = json.loads(stamp.read_text())
        if done.get("md5") == md5 and all((archive.parent / name).exists() for name in done.get("names", ())):
            log.info("%s: already extracted (%s)", archive, ", ".join(done["names"]))
            return
    names = archives.extract(archive, archive.parent)
    log.info("%s: extracted %s", archive, ", ".join(names))
    _write_json(stamp, {"md5": md5, "names": names})


def fetch(dataset: str, root: str | os.PathLike, mirror: str | None = None) -> list[dict]:
    """Download (if needed), verify and extract every file of `dataset` into root; returns [{file, md5}]."""
    if dataset not in RESOURCES:
        raise KeyError(f"dataset {dataset!r} has no downloads; datasets with downloads: {sorted(RESOURCES)}")
    root = Path(root)
    resources = RESOURCES[dataset]
    with _socket_timeout(SOCKET_TIMEOUT_S):
        for resource in resources:
            ensure_file(resource, root, mirror)
    for resource in resources:
        _extract_once(root / resource.file, resource.md5)
    return [{"file": r.file, "md5": r.md5} for r in resources]


def _write_json(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)


def retry_advice(root: str | os.PathLike, record_path: str | os.PathLike) -> str:
    """How to try a failed download again: one command. Forcing the record's rule reruns the download and every
    job downstream of it (prepare, sample orders, the dataset's training rows), and nothing else; deleting the
    record alone would not (Snakemake does not remake an input of a job whose outputs exist)."""
    return (f"to retry: fix the source (data.mirror, the network, or the right file placed in {root}), then "
            f"rerun with `--forcerun {record_path}` (e.g. `snakemake --cores all --forcerun {record_path}`)")


def record(dataset: str, root: str | os.PathLike, mirror: str | None, record_path: str | os.PathLike) -> dict:
    """Fetch `dataset` and write download.json; a failed download is logged and recorded, not raised."""
    try:
        result = {"status": "ok", "message": None, "files": fetch(dataset, root, mirror)}
    except (DownloadError, archives.ArchiveError) as err:
        log.error("%s: %s", dataset, err)
        retry = retry_advice(root, record_path)
        log.error("%s is recorded as failed in %s; %s", dataset, record_path, retry)
        result = {"status": "failed", "message": f"{err}; {retry}", "files": []}
    _write_json(Path(record_path), result)
    return result
