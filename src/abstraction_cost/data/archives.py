"""Safe extraction of the downloaded archives (.tar, .tar.gz, .tgz, single-file .gz).

Every tar member is checked before anything is written for it, and the error names the archive and the member:
- rejected: absolute names, names with a `..` component, symbolic or hard links whose target lies outside the
  archive's tree, device files, FIFOs and any other special member;
- links whose target lies inside the tree are materialised as copies of the target file, so no link is ever
  created on disk and every path is checked lexically against a tree made of real directories only;
- file modes come from us (0644 files, 0755 directories), never from the archive (no setuid, no odd owners).
Extraction goes into a hidden temporary directory beside the target, which is removed on any failure; only a
complete extraction is moved into place, so a half-extracted tree never looks extracted.
"""
from __future__ import annotations

import gzip
import os
import posixpath
import shutil
import tarfile
import zlib
from pathlib import Path

CHUNK = 1 << 20
MAX_LINK_HOPS = 8


class ArchiveError(RuntimeError):
    """An archive that is unreadable or unsafe; the message names the archive (and the member at fault)."""


class UnsafeArchive(ArchiveError):
    """A member that would be written outside the target directory, or a special file."""


def _member_path(archive: Path, name: str) -> str | None:
    """The member's normalised relative path, or None for the archive's root ('.', './')."""
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchive(f"{archive}: member {name!r} has an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchive(f"{archive}: member {name!r} has a '..' component")
    return "/".join(parts) or None


def _link_target(archive: Path, member: tarfile.TarInfo, path: str) -> str:
    """Where a link member points, relative to the archive root; outside the tree is an error."""
    link = member.linkname
    if link.startswith("/"):
        raise UnsafeArchive(f"{archive}: member {member.name!r} links to the absolute path {link!r}")
    base = posixpath.dirname(path) if member.issym() else ""  # hard links are relative to the archive root
    target = posixpath.normpath(posixpath.join(base, link))
    if target == ".." or target.startswith("../"):
        raise UnsafeArchive(f"{archive}: member {member.name!r} links to {link!r}, outside the archive's tree")
    return target


def _write_file(src, dest: Path) -> None:
    if dest.is_dir():
        raise ArchiveError(f"{dest}: a directory is in the way of a file member")
    dest.unlink(missing_ok=True)  # a later member of the same name replaces an earlier one, as tar does
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(src, out, CHUNK)


def _extract_tar(archive: Path, tmp: Path) -> None:
    links: dict[str, tuple[str, str]] = {}  # link path -> (target path, member name), materialised at the end
    files: set[str] = set()
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:  # streams: each header is checked before its data is written
            path = _member_path(archive, member.name)
            if path is None:
                continue
            if member.isdev() or member.isfifo():
                raise UnsafeArchive(f"{archive}: member {member.name!r} is a device file or FIFO")
            dest = tmp / path
            if member.isdir():
                dest.mkdir(mode=0o755, parents=True, exist_ok=True)
            elif member.issym() or member.islnk():
                links[path] = (_link_target(archive, member, path), member.name)
            elif member.isreg():
                dest.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                with tar.extractfile(member) as src:
                    _write_file(src, dest)
                files.add(path)
            else:
                raise UnsafeArchive(f"{archive}: member {member.name!r} has unsupported type {member.type!r}")
    for path, (target, name) in links.items():
        for _ in range(MAX_LINK_HOPS):
            if target not in links:
                break
            target = links[target][0]
        if target not in files:
            raise ArchiveError(f"{archive}: link member {name!r} points to {target!r}, which is not a file "
                               "of the archive")
        (tmp / path).parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        with open(tmp / target, "rb") as src:
            _write_file(src, tmp / path)


def _extract_gzip(archive: Path, tmp: Path) -> None:
    with gzip.open(archive, "rb") as src:
        _write_file(src, tmp / archive.name.removesuffix(".gz"))


def kind(archive: str | os.PathLike) -> str:
    name = Path(archive).name
    if name.endswith((".tar", ".tar.gz", ".tgz")):
        return "tar"
    if name.endswith(".gz"):
        return "gzip"
    raise ArchiveError(f"{archive}: not an archive this extractor knows (.tar, .tar.gz, .tgz, .gz)")


def extract(archive: str | os.PathLike, target: str | os.PathLike) -> list[str]:
    """Extract `archive` into `target` safely; returns the top-level names it placed there."""
    archive, target = Path(archive), Path(target)
    extractor = {"tar": _extract_tar, "gzip": _extract_gzip}[kind(archive)]
    target.mkdir(parents=True, exist_ok=True)
    tmp = target / f".extract-{archive.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        try:
            extractor(archive, tmp)
        except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as err:
            raise ArchiveError(f"{archive}: unreadable or truncated archive: {err}") from err
        names = sorted(os.listdir(tmp))
        if archive.name in names and archive.parent.resolve() == target.resolve():
            raise UnsafeArchive(f"{archive}: member {archive.name!r} would replace the archive itself")
        for name in names:
            dest = target / name
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            elif dest.exists() or dest.is_symlink():
                dest.unlink()
            os.replace(tmp / name, dest)
        return names
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
