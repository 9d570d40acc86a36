"""Unmodified upstream TF2 scripts through the lab: legacy Keras by default, and the run's
summary agrees with the total the script prints itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab.cluster import launch
from lab.cluster.launchers.base import find_program
from lab.cluster.rundir import read_manifest
from lab.metrics import store

REPO = Path(__file__).resolve().parents[2]
ECHO = REPO / "tests" / "bin" / "echo_rank.py"
HVD_TF2 = REPO / "tests" / "bin" / "hvd_tf2_tape.py"


def _shown(run_dir: Path, name: str) -> set[str]:
    text = "".join(p.read_text() for p in run_dir.glob("rank-*.log"))
    return set(re.findall(rf"env {name}=(\S+)", text))


def test_ranks_get_legacy_keras_unless_the_job_says_otherwise(monkeypatch) -> None:
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    monkeypatch.delenv("DISTLAB_LEAN_TF_IMPORT", raising=False)
    cmd = ["python", str(ECHO), "--show-env", "TF_USE_LEGACY_KERAS"]
    default = launch(cmd, np=2, view=None)
    assert _shown(default.run_dir, "TF_USE_LEGACY_KERAS") == {"1"}
    manifest = read_manifest(default.run_dir)
    assert manifest["env_defaults"] == {"TF_USE_LEGACY_KERAS": "1", "DISTLAB_LEAN_TF_IMPORT": "1"}
    assert manifest["env"]["TF_USE_LEGACY_KERAS"] == "1"

    own = launch(cmd, np=2, view=None, env={"TF_USE_LEGACY_KERAS": "0"})
    assert _shown(own.run_dir, "TF_USE_LEGACY_KERAS") == {"0"}
    assert read_manifest(own.run_dir)["env_defaults"] == {"DISTLAB_LEAN_TF_IMPORT": "1"}


@pytest.mark.slow
def test_horovod_tf2_example_runs_and_its_total_is_the_summary(monkeypatch) -> None:
    if find_program("horovodrun") is None:
        pytest.skip("horovodrun is not installed")
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    result = launch(
        ["python", str(HVD_TF2), "--iters", "3"],
        np=2,
        launcher="horovod",
        view=None,
        timeout=400,
        check=False,
    )
    rank0 = (result.run_dir / "rank-0.log").read_text()
    assert result.ok, rank0[-3000:]
    assert "has no attribute 'ref'" not in rank0
    total = re.search(r"^Total img/sec on 2 CPU\(s\): ([0-9.]+) \+-", rank0, re.M)
    assert total, rank0[-2000:]
    assert "img/sec" not in (result.run_dir / "rank-1.log").read_text()  # rank 0 reports
    row = store.summarize_run(result.run_dir)
    assert row["throughput_total"] == pytest.approx(float(total.group(1)))
    assert row["throughput_from"] == "script total line"
