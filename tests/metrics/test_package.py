"""The package's face: lazy re-exports, nothing heavy imported at import time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import lab.metrics

REPO = Path(__file__).resolve().parents[2]


def test_import_is_light() -> None:
    code = (
        "import sys, lab.metrics; "
        "heavy = [m for m in ('pandas', 'plotly', 'scipy', 'tqdm', 'IPython') "
        "if m in sys.modules]; "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_public_names_resolve() -> None:
    for name in lab.metrics.__all__:
        assert getattr(lab.metrics, name) is not None, name
    assert lab.metrics.Sweep.__module__ == "lab.metrics.sweep"
    assert lab.metrics.parse_line("Iter #1: 2.0 img/sec per GPU")[0]["throughput"] == 2.0
