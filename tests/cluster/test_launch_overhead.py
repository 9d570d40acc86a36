"""What a launch costs beside its ranks: no scan of every process on the machine, versions
read once per process, git asked while the ranks run, the guard's own start-up lean.
(Times are measured by `python -m lab bench launch`, never asserted here.)"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.cluster import launch, rundir
from lab.cluster.guard import _descendants_by_scan, _parse, descendants
from lab.cluster.rundir import read_manifest

REPO = Path(__file__).resolve().parents[2]
FAKE_RANK = REPO / "tests" / "bin" / "fake_rank.py"


def test_a_launch_never_lists_every_process(monkeypatch, tmp_path: Path) -> None:
    import psutil

    def everything(*_a, **_k):
        raise AssertionError("psutil.process_iter lists every process on the machine")

    monkeypatch.setattr(psutil, "process_iter", everything)
    result = launch(
        [sys.executable, str(FAKE_RANK), "--sleep", "0.5"], np=2, view=None, results_root=tmp_path
    )
    assert result.ok
    ranks = read_manifest(result.run_dir)["ranks"]
    assert all(ranks[r]["pid"] for r in ("0", "1"))  # still learnt from the guards' trees


def test_descendants_walk_matches_a_scan_of_proc() -> None:
    proc = subprocess.Popen(["bash", "-c", "sleep 30 & sleep 30"], stdin=subprocess.DEVNULL)
    try:
        for _ in range(200):
            below = descendants(proc.pid)
            if len(below) == 2:  # bash's two sleeps
                break
            subprocess.run(["sleep", "0.05"], check=True, timeout=5)
        assert len(below) == 2
        assert sorted(below) == sorted(_descendants_by_scan(proc.pid))
        assert proc.pid in descendants(os.getpid())
    finally:
        for pid in descendants(proc.pid):
            os.kill(pid, 9)
        proc.kill()
        proc.wait(10)


def test_package_versions_are_read_once_per_process(monkeypatch) -> None:
    rundir.package_versions()  # may be the first call in this process
    calls: list[str] = []
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda d: calls.append(d) or real(d))
    first, second = rundir.package_versions(), rundir.package_versions()
    assert first == second and first["python"] and calls == []
    first["numpy"] = "changed"  # callers get a copy
    assert rundir.package_versions()["numpy"] != "changed"


def test_git_state_is_read_afresh_for_each_launch(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, timeout=30,
                       capture_output=True)  # fmt: skip

    git("init", "-q")
    (tmp_path / "f").write_text("1")
    git("add", "f")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    assert rundir.git_state_later(tmp_path)()["dirty"] is False
    (tmp_path / "f").write_text("2")
    assert rundir.git_state_later(tmp_path)()["dirty"] is True


def test_a_launch_records_git_after_its_ranks(tmp_path: Path) -> None:
    result = launch([sys.executable, "-c", "pass"], np=1, view=None, results_root=tmp_path)
    assert read_manifest(result.run_dir)["git"] == rundir.git_state()


def test_guard_flags_without_argparse() -> None:
    opts, cmd = _parse(["--env", "A=1", "--env", "B=2", "--grace", "2", "--", "x", "--grace"])
    assert (opts.env, opts.grace, opts.cwd, opts.forward_eof, cmd) == (
        ["A=1", "B=2"], 2.0, None, None, ["x", "--grace"]
    )  # fmt: skip
    for bad in (["--grace", "--"], ["--nope", "1", "--", "x"], ["--grace", "x", "--", "y"]):
        with pytest.raises(SystemExit):
            _parse(bad)
    with pytest.raises(SystemExit, match="no command"):
        _parse(["--"])


GUARD = REPO / "lab" / "cluster" / "guard.py"


def test_guard_starts_commands_itself_and_imports_little(tmp_path: Path) -> None:
    """The guard spawns with os.posix_spawn (PATH and cwd as subprocess would take them)
    and imports neither subprocess nor enum, whose imports were most of its start-up."""
    tool = tmp_path / "bin" / "where-am-i"
    tool.parent.mkdir()
    tool.write_text('#!/bin/sh\npwd\necho "$X"\nexit 3\n')
    tool.chmod(0o755)
    guard = [sys.executable, "-I", "-S", "-X", "importtime", str(GUARD)]
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [*guard, "--cwd", str(tmp_path), "--env", f"PATH={tool.parent}", "--env", "X=y",
         "--", "where-am-i"],
        capture_output=True, text=True, timeout=30, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 3
    assert done.stdout.split() == [str(tmp_path), "y"]
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in done.stderr.splitlines()}
    assert "select" in imported and not {"subprocess", "enum", "argparse"} & imported
    missing = subprocess.run(
        [*guard, "--", "no-such-program-here"], capture_output=True, text=True, timeout=30,
        env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert missing.returncode == 127 and "cannot start 'no-such-program-here'" in missing.stderr
