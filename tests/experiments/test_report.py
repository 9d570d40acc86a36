"""The reproduction report and the README's figures table come from one catalog."""

from __future__ import annotations

import json
from pathlib import Path

import plotly.graph_objects as go

from lab import REPO_ROOT
from lab.experiments import Status, Verdict, conclude
from lab.experiments.catalog import FIGURES
from lab.experiments.report import collect, readme_with_table, write_report


def test_readme_table_is_the_catalog() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert readme == readme_with_table(readme), (
        "README's figures table differs from lab/experiments/catalog.py: "
        "run `python -m lab report --write-readme`"
    )


def test_every_catalog_notebook_exists() -> None:
    for entry in FIGURES:
        if entry.notebook:
            assert (REPO_ROOT / "notebooks" / entry.notebook).is_file(), entry


def test_every_notebook_is_in_the_catalog() -> None:
    listed = {entry.notebook for entry in FIGURES}
    notebooks = {
        str(p.relative_to(REPO_ROOT / "notebooks"))
        for p in (REPO_ROOT / "notebooks").rglob("*.ipynb")
        if ".ipynb_checkpoints" not in p.parts
    }
    assert notebooks <= listed, f"not in lab/experiments/catalog.py: {sorted(notebooks - listed)}"


def test_every_concluded_figure_is_a_catalog_row() -> None:
    """A notebook's conclude(..., room, ...) must land where the report looks."""
    import re

    rows = {(entry.room, entry.figure.lower()) for entry in FIGURES}
    rooms = {room for room, _ in rows}
    for nb in (REPO_ROOT / "notebooks").rglob("*.ipynb"):
        for room in re.findall(r'conclude\([^"]*"(\w+)"', nb.read_text()):
            assert room in rooms, f"{nb.name} concludes into room {room!r}, not in the catalog"


def _run_dir(results: Path) -> Path:
    run = results / "runs" / "kungfu" / "r1"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    return run


def test_report_lists_every_figure_with_computed_status(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    verdict = Verdict(
        "KungFu (OSDI'20)",
        "Fig 8",
        "monitoring costs little",
        Status.NOT_RESOLVED,
        0.05,
        0.08,
        0.046,
        "artifact README",
        "fraction",
        why="the interval is wider than the effect",
        runs=(str(run),),
    )
    conclude(verdict, "kungfu", figure=go.Figure(), save_figure=True, results=tmp_path)
    rows = {(r.entry.room, r.entry.figure): r for r in collect(tmp_path)}
    assert len(rows) == sum(f.in_report for f in FIGURES)
    fig8 = rows[("kungfu", "Fig 8")]
    assert fig8.status == "not resolved at this scale"
    assert {label for label, _ in fig8.links} >= {"figure", "verdict", "r1"}
    others = [r for k, r in rows.items() if k != ("kungfu", "Fig 8")]
    assert all(r.status == "not measured here" and r.why for r in others)
    page = write_report(tmp_path).read_text()
    assert page.count("<tr>") == len(rows) + 1 and "http" not in page.split("<body>")[1]
    for _, rel in fig8.links:
        assert (tmp_path / rel).is_file()
    assert json.loads((tmp_path / "verdicts" / "kungfu" / "fig_8.json").read_text())["lab_ci"]
    assert "Precision: ±0.08 fraction at 95% (160% of the value)." in page
