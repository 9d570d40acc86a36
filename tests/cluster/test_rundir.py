"""Run directories and manifests (lab.cluster.rundir)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lab.cluster.rundir import (
    git_state,
    new_run_dir,
    package_versions,
    read_manifest,
    timestamp,
    write_manifest,
)
from lab.errors import ParameterError


def test_new_run_dirs_are_fresh_and_named_by_time(tmp_path: Path) -> None:
    dirs = [new_run_dir("fig7/smoke", tmp_path) for _ in range(30)]
    assert len(set(dirs)) == 30
    for d in dirs:
        assert d.is_dir() and d.parent == tmp_path / "runs" / "fig7" / "smoke"
        assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", d.name)


def test_results_root_from_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DISTLAB_RESULTS", str(tmp_path / "elsewhere"))
    assert new_run_dir("x").parent == tmp_path / "elsewhere" / "runs" / "x"


@pytest.mark.parametrize("bad", ["", "../up", "a/../b", "/abs", "has space", ".hidden", "a//b"])
def test_bad_experiment_names(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ParameterError, match="experiment"):
        new_run_dir(bad, tmp_path)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("*-*"))


def test_manifest_merges_and_rewrites_atomically(tmp_path: Path) -> None:
    write_manifest(tmp_path, state="running", params={"bs": 32}, started=timestamp(0.0))
    write_manifest(tmp_path, state="succeeded", exit_code=0, path=tmp_path)
    data = read_manifest(tmp_path)
    assert data["state"] == "succeeded" and data["params"] == {"bs": 32}
    assert data["started"] == {"iso": "1970-01-01T00:00:00.000+00:00", "epoch": 0.0}
    assert data["path"] == str(tmp_path)  # not JSON-able values are written as text
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]  # no temp file left
    json.loads((tmp_path / "manifest.json").read_text())


def test_versions_are_read_without_importing_engines() -> None:
    code = (
        "import sys, json; from lab.cluster.rundir import package_versions as v; "
        "out = v(); assert 'tensorflow' not in sys.modules and 'torch' not in sys.modules; "
        "print(json.dumps(out))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    versions = json.loads(done.stdout)
    assert versions["python"].count(".") == 2 and versions["lab"]
    assert set(versions) >= {"tensorflow", "horovod", "torch", "mpi4py"}
    assert package_versions()["python"] == versions["python"]


def test_git_state(tmp_path: Path) -> None:
    assert git_state(tmp_path) == {"commit": None, "dirty": None}  # not a repository

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, timeout=30,
                       capture_output=True)  # fmt: skip

    git("init", "-q")
    (tmp_path / "f.txt").write_text("a")
    git("add", "f.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    state = git_state(tmp_path)
    assert re.fullmatch(r"[0-9a-f]{40}", state["commit"]) and state["dirty"] is False
    (tmp_path / "f.txt").write_text("b")
    assert git_state(tmp_path)["dirty"] is True
