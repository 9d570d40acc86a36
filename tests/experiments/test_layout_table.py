"""The README's layout table is generated from lab/'s docstrings and lists every module."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.experiments.layout_table import (
    LAYOUT_BEGIN,
    LAYOUT_END,
    layout_table,
    modules,
    readme_with_layout,
    summary,
)
from lab.metrics.layout import REPO_ROOT


def test_readme_layout_table_is_lab_as_it_is() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert readme == readme_with_layout(readme), (
        "README's layout table differs from lab/'s modules and docstrings: "
        "run `python -m lab report --write-readme`"
    )


def test_every_module_is_a_row_with_what_it_does() -> None:
    shown = dict(modules())
    for path in (REPO_ROOT / "lab").rglob("*.py"):
        rel = path.relative_to(REPO_ROOT).as_posix()
        package = path.name == "__init__.py" and path.parent != REPO_ROOT / "lab"
        key = rel.removesuffix("__init__.py") if package else rel
        assert key in shown, rel
        assert shown[key], f"{rel} has no docstring to say what it does"


@pytest.mark.parametrize(
    ("docstring", "expected"),
    [
        ("One line.", "One line."),
        ("Wrapped over\ntwo lines. Then more.\n\nAnd a paragraph.", "Wrapped over two lines."),
        ("Keeps ``lab.x``: e.g. 1.5 s. `Code` next.", "Keeps ``lab.x``: e.g. 1.5 s."),
        ("No full stop\n\nSecond paragraph.", "No full stop"),
        (None, ""),
    ],
)
def test_summary_is_the_first_sentence(docstring: str | None, expected: str) -> None:
    assert summary(docstring) == expected


def test_a_new_module_or_a_changed_docstring_makes_the_table_stale(tmp_path: Path) -> None:
    pkg = tmp_path / "lab" / "metrics"
    pkg.mkdir(parents=True)
    (tmp_path / "lab" / "__init__.py").write_text('"""The face."""\n')
    (pkg / "__init__.py").write_text('"""What a run means."""\n')
    (pkg / "stats.py").write_text('"""Numbers | intervals."""\n')
    table = layout_table(tmp_path)
    assert table.splitlines()[2:] == [
        "| `lab/__init__.py` | The face. |",
        "| **`lab/metrics/`** | What a run means. |",
        "| `lab/metrics/stats.py` | Numbers &#124; intervals. |",
    ]
    readme = f"intro\n{LAYOUT_BEGIN}\n{table}\n{LAYOUT_END}\nrest\n"
    assert readme_with_layout(readme, tmp_path) == readme
    (pkg / "store.py").write_text('"""Runs as tables."""\n')
    assert readme_with_layout(readme, tmp_path) != readme
