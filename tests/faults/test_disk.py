"""Scenarios 3 and 11: the disk full while a table is written; results/ or resources/ not writable."""
import contextlib
import os
import subprocess

import pytest

from abstraction_cost import tables

from .conftest import EAGER_ROWS


def test_disk_full_while_a_table_is_written(work):
    full = work.snakemake(EAGER_ROWS, AC_FAULT="table:enospc@training")
    assert full.returncode != 0
    # the cause, the table and its file, and the fix
    assert "No space left on device" in full.output and "table 'training'" in full.output, full.output[-4000:]
    assert "free space" in full.output
    assert not (work.path / EAGER_ROWS).exists()
    assert not work.leftovers(), work.leftovers()
    rerun = work.snakemake(EAGER_ROWS)
    assert rerun.returncode == 0, rerun.output[-4000:]
    assert work.jobs_run(rerun.output) == ["train_eager"]
    assert (tables.read("training", work.path / EAGER_ROWS)["status"] == "ok").all()


@contextlib.contextmanager
def read_only(path):
    """path read-only, for root too (a read-only bind mount; chmod does not stop root)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield
        finally:
            path.chmod(0o755)
        return
    try:
        subprocess.run(["mount", "--bind", str(path), str(path)], check=True, capture_output=True)
        subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"cannot make {path} read-only as root here: {err}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(path)], check=True)


@pytest.mark.parametrize("directory", ["results", "resources"])
def test_results_or_resources_not_writable(work, directory):
    with read_only(work.path / directory):
        refused = work.snakemake(EAGER_ROWS)
    assert refused.returncode != 0
    assert f"'{directory}" in refused.output and "not writable" in refused.output, refused.output[-4000:]
    assert "Traceback" not in refused.output
    rerun = work.snakemake(EAGER_ROWS)
    assert rerun.returncode == 0, rerun.output[-4000:]
    assert (tables.read("training", work.path / EAGER_ROWS)["status"] == "ok").all()
