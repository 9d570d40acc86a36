"""Small mistakes at the command line end in a clear error (exit 2, the parameter named),
before anything starts; ``python -m lab profiles`` lists past a broken profile."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import lab.__main__ as lab_main
from lab.cluster import inventory

REPO = Path(__file__).resolve().parents[2]


def _lab(*argv: str, results: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lab", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={"DISTLAB_RESULTS": str(results), "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["launch", "-H", "", "--", "true"], "error: hosts is empty"),
        (["launch", "--cluster", " ", "--", "true"], "error: cluster is empty"),
        (["launch", "-np", "1"], "error: command="),
        (
            ["launch", "--", "python", "-m", "lab.bench.nosuch"],
            "error: command='lab.bench.nosuch' is not allowed",
        ),
    ],
    ids=["empty-hosts", "empty-cluster", "no-command", "no-such-workload"],
)
def test_small_mistakes_exit_2_naming_the_parameter(argv, message, tmp_path: Path) -> None:
    done = _lab(*argv, results=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not (tmp_path / "runs").exists()  # nothing started


def test_profiles_lists_past_an_invalid_profile(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "a-broken.yaml").write_text("hosts: [{name: 'node1;rm -rf x'}]\n")
    (tmp_path / "b-typo.yaml").write_text("hosts: node1:2\ngpuz: 2\n")
    (tmp_path / "c-good.yaml").write_text("description: fine\nhosts: node1:2,node2:2\n")
    monkeypatch.setattr(inventory, "PROFILE_DIR", tmp_path)
    assert lab_main.main(["profiles"]) == 1
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()] == ["local", "c-good"]
    assert "c-good           remote    2 hosts, 4 slots  fine" in out
    assert "a-broken         invalid" in err and "hosts[0].name" in err
    assert "b-typo           invalid" in err and "gpuz" in err
