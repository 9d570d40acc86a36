"""A manifest that says ``running`` after its launching process died reads as ``orphaned``.

The owners here are real processes: one that ran and exited (its pid and start time no
longer match anything), this test process (alive), and ones that cannot be judged here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lab.metrics import liveness
from lab.metrics.layout import read_manifest
from lab.metrics.store import list_runs


def _ended_process() -> dict[str, Any]:
    """The identity of a real process, taken while it ran, after it has exited."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    ident = liveness.identity(proc.pid)
    assert liveness.ended(ident) is False
    proc.communicate(timeout=30)
    return ident


def _run(root: Path, name: str, **fields: Any) -> Path:
    run_dir = root / "runs" / "exp" / name
    run_dir.mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({"state": "running", **fields}))
    return run_dir


def test_a_running_run_whose_owner_died_reads_orphaned(tmp_path: Path) -> None:
    owner = _ended_process()
    assert liveness.ended(owner) is True
    run_dir = _run(tmp_path, "20250101-000000-aaaaaa", owner=owner, params={"np": 2})
    manifest = read_manifest(run_dir)
    assert manifest["state"] == "orphaned" and manifest["params"] == {"np": 2}
    assert f"pid {owner['pid']}" in manifest["reason"]
    # written back, so that every later reader (and a person with an editor) sees it
    assert json.loads((run_dir / "manifest.json").read_text())["state"] == "orphaned"
    assert [p.name for p in (run_dir.iterdir())] == ["manifest.json"]  # no temp file left
    assert list_runs("exp", tmp_path) == [run_dir]


@pytest.mark.parametrize(
    "owner",
    [
        pytest.param("self", id="owner-alive"),
        pytest.param(None, id="no-owner-recorded"),
        pytest.param("other-host", id="another-machine"),
        pytest.param("no-start-time", id="incomplete"),
    ],
)
def test_a_run_that_may_still_run_stays_running(tmp_path: Path, owner: str | None) -> None:
    ident: dict[str, Any] | None = None
    if owner == "self":
        ident = liveness.identity()
    elif owner == "other-host":
        ident = {**_ended_process(), "host": "not-" + str(liveness.identity()["host"])}
    elif owner == "no-start-time":
        ident = {**_ended_process(), "start_time": None}
    run_dir = _run(tmp_path, "r", **({"owner": ident} if ident else {}))
    assert read_manifest(run_dir)["state"] == "running"
    assert json.loads((run_dir / "manifest.json").read_text())["state"] == "running"


def test_a_finished_run_is_left_as_it_ended(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "r", owner=_ended_process())
    data = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps({**data, "state": "succeeded"}))
    assert read_manifest(run_dir)["state"] == "succeeded"


def test_a_rebooted_machine_orphans_its_runs(tmp_path: Path) -> None:
    ident = {**liveness.identity(), "boot_id": "an-earlier-boot"}  # this pid, another boot
    run_dir = _run(tmp_path, "r", owner=ident)
    assert read_manifest(run_dir)["state"] == "orphaned"
