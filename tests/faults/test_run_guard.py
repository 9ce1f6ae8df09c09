"""run_guard's parts alone (the scenarios above run them through Snakemake): which runs take the lock, a live
holder refused by pid, stale Snakemake locks cleared, unwritable folders named."""
import subprocess
import sys
import time

import pytest

from abstraction_cost import run_guard


@pytest.mark.parametrize("argv, takes_none", [
    (["snakemake", "-n"], True), (["snakemake", "-np"], True), (["snakemake", "--dry-run"], True),
    (["snakemake", "--nolock"], True), (["snakemake", "--cores", "all"], False), (["snakemake", "-c4"], False),
    (["snakemake", "-s", "Snakefile"], False),
])
def test_which_runs_take_no_lock(argv, takes_none):
    assert run_guard._takes_no_lock(argv) is takes_none


def test_live_holder_is_refused_by_pid_and_stale_locks_cleared(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run_guard, "_held", None)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys; sys.path[:0] = sys.argv[1:]; from abstraction_cost import run_guard; "
        "run_guard.claim(['snakemake']); print('held', flush=True); import time; time.sleep(60)"),
        *sys.path], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(run_guard.RunGuardError, match=f"another Snakemake \\(pid {holder.pid}, started"):
            run_guard.claim(["snakemake"])
    finally:
        holder.kill()
        holder.wait()
    (tmp_path / ".snakemake" / "locks").mkdir(parents=True)
    (tmp_path / ".snakemake" / "locks" / "0.output.lock").write_text("results/x\n")
    said = run_guard.claim(["snakemake"])   # the holder is dead: its lock went with it
    assert "stale lock" in said and not list((tmp_path / ".snakemake" / "locks").iterdir())
    monkeypatch.setattr(run_guard, "_held", None)   # (the fd closes with the test process)


def test_unwritable_folder_is_named_with_its_key(tmp_path):
    blocker = tmp_path / "results"
    blocker.write_text("a file where a folder should be")
    with pytest.raises(run_guard.RunGuardError, match=r"'.*results/sub' \(results\) is not writable"):
        run_guard.check_writable({"results": str(blocker / "sub")})
    run_guard.check_writable({"logs": str(tmp_path / "logs" / "deep")})   # not there yet: its parent is checked
    assert not (tmp_path / "logs").exists()
