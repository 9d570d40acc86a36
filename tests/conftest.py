"""Shared test settings: results go to a temp dir, never into the repo's results/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = REPO / ".venv" / "bin"


@pytest.fixture(autouse=True)
def _isolated_results(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> Path:
    """Each test writes runs under its own temp results root (DISTLAB_RESULTS)."""
    root = tmp_path_factory.mktemp("results")
    monkeypatch.setenv("DISTLAB_RESULTS", str(root))
    return root


@pytest.fixture(autouse=True)
def _venv_on_path(monkeypatch) -> None:
    """Ranks and launchers (mpirun, horovodrun, torchrun) come from the project's venv."""
    if VENV_BIN.is_dir():
        monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
