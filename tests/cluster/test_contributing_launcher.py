"""The launcher CONTRIBUTING.md shows is real: its code, run as a module, registers and launches."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import lab
from lab.cluster.launchers.base import LAUNCHERS

DOC = Path(__file__).resolve().parents[2] / "CONTRIBUTING.md"


def test_the_documented_one_file_launcher_runs() -> None:
    code = re.search(r"```python\n(# lab/cluster/launchers/nice.py\n.*?)```", DOC.read_text(), re.S)
    assert code, "CONTRIBUTING.md lost its launcher example"
    module = types.ModuleType("lab.cluster.launchers.nice_example")
    exec(compile(code.group(1), str(DOC), "exec"), module.__dict__)
    try:
        result = lab.launch(
            [sys.executable, "-c", "import os; print('nice', os.nice(0))"],
            np=2,
            launcher="nice",
            experiment="t/nice",
            view=None,
        )
        assert result.ok
        assert "nice 10" in (result.run_dir / "rank-1.log").read_text()
    finally:
        LAUNCHERS.pop("nice", None)
