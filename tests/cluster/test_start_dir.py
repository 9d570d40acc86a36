"""Where ranks start: the caller's directory here and on emulated hosts, the profile's
workdir (else the same path) on SSH hosts; the lab stays importable from anywhere."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from lab.cluster import launch
from lab.cluster.inventory import Cluster, Host
from lab.cluster.launchers.base import ProcessSpec
from lab.cluster.launching import placed_in
from lab.cluster.processes import guarded, with_lab_importable
from lab.cluster.request import LaunchRequest
from lab.metrics.layout import REPO_ROOT


def _spec(host: Host, cwd: str | None = None) -> ProcessSpec:
    return ProcessSpec(argv=("python", "x.py"), env={}, ranks=(0,), host=host, cwd=cwd)


@pytest.mark.parametrize(
    ("host", "given", "expected"),
    [
        (Host("localhost"), None, "/home/me/model"),
        (Host("h1", namespace="distlab-h1"), None, "/home/me/model"),  # emulated
        (Host("node1"), None, "/home/me/model"),  # SSH, no workdir: the same path
        (Host("node1", workdir="/opt/distlab"), None, "/opt/distlab"),
        (Host("localhost", workdir="/opt/distlab"), None, "/home/me/model"),
        (Host("node1", workdir="/opt/distlab"), "/srv/chosen", "/srv/chosen"),
    ],
)
def test_placed_in(host: Host, given: str | None, expected: str) -> None:
    assert placed_in(_spec(host, given), "/home/me/model").cwd == expected


def test_remote_guard_gets_the_directory() -> None:
    if shutil.which("ssh") is None:
        pytest.skip("no ssh client")
    spec = placed_in(_spec(Host("node1", workdir="/opt/distlab")), "/home/me/model")
    argv = guarded(spec, "run-1", grace=1.0).argv
    assert "--cwd /opt/distlab --grace" in argv[-1]  # inside the ssh command string


def test_request_cwd_is_made_absolute(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    local = Cluster(name="local", hosts=(Host("localhost", slots=1),))
    assert LaunchRequest(command=("true",), where=local).cwd is None
    assert LaunchRequest(command=("true",), where=local, cwd="sub").cwd == str(tmp_path / "sub")


def test_lab_is_last_on_pythonpath() -> None:
    env = with_lab_importable({"PYTHONPATH": "/mine"})
    assert env["PYTHONPATH"].split(os.pathsep) == ["/mine", str(REPO_ROOT)]
    again = with_lab_importable(env)
    assert again["PYTHONPATH"] == env["PYTHONPATH"]
    assert with_lab_importable({})["PYTHONPATH"] == str(REPO_ROOT)


def test_ranks_start_where_asked_and_log_to_the_run_dir(tmp_path: Path) -> None:
    where = tmp_path / "elsewhere"
    where.mkdir()
    show = "import os; print('cwd', os.getcwd())"
    result = launch([sys.executable, "-c", show], np=2, cwd=where, results_root=tmp_path, view=None)
    for r in (0, 1):
        assert f"cwd {where}" in (result.run_dir / f"rank-{r}.log").read_text()
    assert result.run_dir.is_relative_to(tmp_path / "runs")


def test_lab_importable_without_its_install(tmp_path: Path) -> None:
    """The MXNet venv has no editable install of the lab: its ranks, started outside the
    checkout, import ``lab`` through PYTHONPATH."""
    mxnet_python = REPO_ROOT / ".venv-mxnet" / "bin" / "python"
    if not mxnet_python.exists():
        pytest.skip("no .venv-mxnet (env/setup_mxnet.sh)")
    show = "import lab.metrics.tags as t; print('from', t.__file__)"
    result = launch([str(mxnet_python), "-c", show], cwd=tmp_path, results_root=tmp_path, view=None)
    text = (result.run_dir / "rank-0.log").read_text()
    assert f"from {REPO_ROOT / 'lab' / 'metrics' / 'tags.py'}" in text
