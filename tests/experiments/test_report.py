"""The reproduction report and the README's figures table come from one catalog."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import plotly.graph_objects as go
import pytest

from lab import REPO_ROOT
from lab.experiments import Status, Verdict, conclude
from lab.experiments.batch import BATCH_ENV
from lab.experiments.catalog import FIGURES
from lab.experiments.report import ReportRow, collect, readme_with_table, write_report
from lab.experiments.saved import load_verdict, saved_scales
from lab.metrics.versions import resolved


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


def _run_dir(results: Path, name: str = "r1") -> Path:
    run = results / "runs" / "kungfu" / name
    run.mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    return run


def _fig8(run: Path, scale: str = "smoke", status: Status = Status.NOT_RESOLVED) -> Verdict:
    return Verdict(
        "KungFu (OSDI'20)",
        "Fig 8",
        "monitoring costs little",
        status,
        0.05,
        0.08,
        0.046,
        "artifact README",
        "fraction",
        scale=scale,
        why="the interval is wider than the effect",
        runs=(str(run),),
    )


def _figure(label: str) -> go.Figure:
    return go.Figure(go.Bar(x=["a", "b"], y=[1, 2], name=label))


def _row(results: Path, figure: str = "Fig 8") -> ReportRow:
    return next(r for r in collect(results) if (r.entry.room, r.entry.figure) == ("kungfu", figure))


LATEST = (("figures", "html"), ("verdicts", "json"))


def test_report_lists_every_figure_with_computed_status(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    conclude(_fig8(run), "kungfu", figure=go.Figure(), results=tmp_path)
    rows = {(r.entry.room, r.entry.figure): r for r in collect(tmp_path)}
    assert len(rows) == sum(f.in_report for f in FIGURES)
    fig8 = rows[("kungfu", "Fig 8")]
    assert fig8.status == "not resolved at this scale"
    assert fig8.why == "Lab 0.05 ± 0.08 fraction against 0.046 fraction published."
    [smoke] = fig8.scales
    assert smoke.figure is not None and not smoke.refusal and fig8.shown is smoke
    others = [r for k, r in rows.items() if k != ("kungfu", "Fig 8")]
    assert all(r.status == "not measured here" and r.why and not r.scales for r in others)
    page = write_report(tmp_path).read_text()
    assert page.count('<section class="row') == len(rows) and "http" not in page.split("<body>")[1]
    hrefs = [h.split('"')[0] for h in page.split('href="')[1:]]
    latest = {
        tmp_path / "figures/kungfu/smoke/fig_8.html",
        tmp_path / "verdicts/kungfu/smoke/fig_8.json",
    }
    # the page links to the very files it read: the versions the latest links named
    assert {str(resolved(p).relative_to(tmp_path)) for p in latest} <= set(hrefs)
    assert "runs/kungfu/r1/manifest.json" in hrefs
    assert all((tmp_path / h).is_file() for h in hrefs)
    assert load_verdict("kungfu", "Fig 8", results=tmp_path)["lab_ci"] == 0.08
    assert "Precision: ±0.08 fraction at 95% (160% of the value)." in page


def test_a_figure_drawn_from_other_runs_is_refused_and_the_row_says_so(tmp_path: Path) -> None:
    first, second = _run_dir(tmp_path, "r1"), _run_dir(tmp_path, "r2")
    conclude(_fig8(first), "kungfu", figure=_figure("first"), results=tmp_path)
    # the verdict saved again from other runs without its figure: the old one stays behind
    conclude(_fig8(second), "kungfu", results=tmp_path)
    row = _row(tmp_path)
    [smoke] = row.scales
    assert smoke.figure is None and smoke.image is None and row.shown is None
    assert smoke.refusal.startswith("Figure withheld: it was drawn from 1 run (r1), ")
    assert "this verdict from 1 run (r2)" in smoke.refusal
    page = write_report(tmp_path).read_text()
    assert smoke.refusal in page and "<img" not in page
    assert "1 verdict shows no figure: none was saved from the same runs." in page


def test_a_figure_that_names_no_runs_is_refused(tmp_path: Path) -> None:
    conclude(_fig8(_run_dir(tmp_path)), "kungfu", figure=_figure("x"), results=tmp_path)
    resolved(tmp_path / "figures" / "kungfu" / "smoke" / "fig_8.runs.json").unlink()
    [smoke] = _row(tmp_path).scales
    assert smoke.figure is None and "does not name the runs it shows" in smoke.refusal


def test_each_scale_keeps_its_latest_verdict_side_by_side(tmp_path: Path) -> None:
    r1, r2, r3 = (_run_dir(tmp_path, n) for n in ("r1", "r2", "r3"))
    conclude(_fig8(r1), "kungfu", figure=_figure("smoke"), results=tmp_path)
    paper = _fig8(r2, "paper", Status.REPRODUCED)
    conclude(paper, "kungfu", figure=_figure("paper"), results=tmp_path)
    assert load_verdict("kungfu", "Fig 8", "smoke", tmp_path)["runs"] == [str(r1)]
    assert load_verdict("kungfu", "Fig 8", "paper", tmp_path)["runs"] == [str(r2)]
    row = _row(tmp_path)
    assert [s.scale for s in row.scales] == ["smoke", "paper"]
    assert row.status == "reproduced" and row.shown.scale == "paper"  # the latest is shown
    assert all(s.figure is not None for s in row.scales)
    conclude(_fig8(r3), "kungfu", figure=_figure("smoke again"), results=tmp_path)
    row = _row(tmp_path)
    assert [s.record["runs"] for s in row.scales] == [[str(r3)], [str(r2)]]
    assert row.shown.scale == "smoke" and row.status == "not resolved at this scale"
    page = write_report(tmp_path).read_text()
    section = page.split('id="kungfu-fig_8"')[1].split("</section>")[0]
    assert section.count('class="scale s-') == 2
    assert "smoke scale</span><b>not resolved at this scale</b>" in section
    assert "paper scale</span><b>reproduced</b>" in section
    assert "smoke scale: 1 not resolved at this scale; paper scale: 1 reproduced" in page


@pytest.mark.parametrize(
    "rehearsal",
    [dict(scale="paper-rehearsal"), dict(scale="paper", rehearsal=True)],
    ids=["scale", "flag"],
)
def test_a_rehearsal_is_never_a_verdict(tmp_path: Path, rehearsal: dict, capsys) -> None:
    run = _run_dir(tmp_path)
    smoke = _fig8(run)
    conclude(smoke, "kungfu", figure=_figure("smoke"), results=tmp_path)
    rehearsed = replace(_fig8(run, status=Status.REPRODUCED), **rehearsal)
    conclude(rehearsed, "kungfu", figure=_figure("rehearsal"), results=tmp_path)
    assert "A rehearsal: its status is not a verdict." in capsys.readouterr().out
    assert [s.scale for s in saved_scales(tmp_path, "kungfu", "Fig 8")] == ["smoke"]
    [kept] = saved_scales(tmp_path, "kungfu", "Fig 8", rehearsals=True)
    assert kept.record["status"] == "reproduced" and kept.slot.figure.is_file()
    assert not (tmp_path / "verdicts" / "kungfu" / "paper").exists()
    row = _row(tmp_path)
    assert row.status == "not resolved at this scale" and len(row.rehearsals) == 1
    page = write_report(tmp_path).read_text()
    assert "never a verdict" in page and "reproduced</b>" not in page


def test_an_interactive_conclude_writes_the_figure_with_the_verdict(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv(BATCH_ENV, raising=False)
    first, second = _run_dir(tmp_path, "r1"), _run_dir(tmp_path, "r2")
    conclude(_fig8(first), "kungfu", figure=_figure("first"), results=tmp_path)
    conclude(_fig8(second), "kungfu", figure=_figure("second"), results=tmp_path)
    figures = tmp_path / "figures" / "kungfu" / "smoke"
    assert json.loads((figures / "fig_8.runs.json").read_text())["runs"] == [str(second)]
    assert "second" in (figures / "fig_8.plotly.json").read_text()
    assert "second" in (figures / "fig_8.html").read_text()
    [smoke] = _row(tmp_path).scales
    assert smoke.figure is not None and not smoke.refusal


def test_conclude_writes_both_or_neither(tmp_path: Path) -> None:
    first, second = _run_dir(tmp_path, "r1"), _run_dir(tmp_path, "r2")
    conclude(_fig8(first), "kungfu", figure=_figure("first"), results=tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    unwritable = go.Figure(go.Bar(x=["a"], y=[1], customdata=[object()]))  # no JSON for it
    with pytest.raises(TypeError, match="not JSON serializable"):
        conclude(_fig8(second), "kungfu", figure=unwritable, results=tmp_path)
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before, "a failed conclude changed or left files"
    assert load_verdict("kungfu", "Fig 8", results=tmp_path)["runs"] == [str(first)]


def test_a_verdict_and_figure_saved_again_keep_the_first_and_the_report_reads_the_second(
    tmp_path: Path,
) -> None:
    first, second = _run_dir(tmp_path, "r1"), _run_dir(tmp_path, "r2")
    conclude(_fig8(first), "kungfu", figure=_figure("first"), results=tmp_path)
    verdict = tmp_path / "verdicts" / "kungfu" / "smoke" / "fig_8.json"
    figure = tmp_path / "figures" / "kungfu" / "smoke" / "fig_8.html"
    kept = {p: (resolved(p), resolved(p).read_bytes()) for p in (verdict, figure)}
    conclude(_fig8(second), "kungfu", figure=_figure("second"), results=tmp_path)
    for latest, (old, text) in kept.items():
        assert old.read_bytes() == text, f"{old} was changed by a later save"
        assert latest.is_symlink() and resolved(latest) != old
        assert resolved(latest).parent == old.parent  # both versions in the figure's folder
    assert len(list((verdict.parent / "fig_8").glob("*.json"))) == 2
    assert json.loads(verdict.read_text())["runs"] == [str(second)]
    assert "second" in figure.read_text() and "first" in kept[figure][0].read_text()
    [smoke] = _row(tmp_path).scales
    assert smoke.saved.path == resolved(verdict) and smoke.figure == resolved(figure)
    assert smoke.record["runs"] == [str(second)] and not smoke.refusal
    page = write_report(tmp_path).read_text()
    assert os.path.relpath(resolved(figure), tmp_path) in page
    assert os.path.relpath(kept[figure][0], tmp_path) not in page


def test_a_verdict_from_before_versions_is_kept_when_saved_again(tmp_path: Path) -> None:
    run, newer = _run_dir(tmp_path, "r1"), _run_dir(tmp_path, "r2")
    folder = tmp_path / "verdicts" / "kungfu" / "smoke"
    folder.mkdir(parents=True)
    (folder / "fig_8.json").write_text(json.dumps(_fig8(run).to_dict()))
    figures = tmp_path / "figures" / "kungfu" / "smoke"
    figures.mkdir(parents=True)
    (figures / "fig_8.png").write_bytes(b"old png")
    conclude(_fig8(newer), "kungfu", figure=_figure("new"), results=tmp_path)
    assert json.loads((folder / "fig_8" / "legacy.json").read_text())["runs"] == [str(run)]
    assert (figures / "fig_8" / "legacy.png").read_bytes() == b"old png"
    assert not (figures / "fig_8.png").exists()
    assert load_verdict("kungfu", "Fig 8", results=tmp_path)["runs"] == [str(newer)]


def test_verdicts_saved_before_scales_had_folders_are_still_read(tmp_path: Path) -> None:
    run, newer = _run_dir(tmp_path, "r1"), _run_dir(tmp_path, "r2")
    old = {**_fig8(run).to_dict(), "status": "reproduced"}
    (tmp_path / "verdicts" / "kungfu").mkdir(parents=True)
    (tmp_path / "verdicts" / "kungfu" / "fig_8.json").write_text(json.dumps(old))
    figures = tmp_path / "figures" / "kungfu"
    figures.mkdir(parents=True)
    _figure("old").write_html(figures / "fig_8.html")
    (figures / "fig_8.runs.json").write_text(json.dumps([str(run)]))  # a bare list, then
    conclude(_fig8(newer, "paper"), "kungfu", figure=_figure("paper"), results=tmp_path)
    row = _row(tmp_path)
    assert [(s.scale, s.record["status"]) for s in row.scales] == [
        ("smoke", "reproduced"),
        ("paper", "not resolved at this scale"),
    ]
    assert all(s.figure is not None and not s.refusal for s in row.scales)
    assert load_verdict("kungfu", "Fig 8", "smoke", tmp_path)["runs"] == [str(run)]
    # a verdict in the smoke folder is newer than the old single file, which it replaces
    conclude(_fig8(newer), "kungfu", figure=_figure("smoke"), results=tmp_path)
    assert load_verdict("kungfu", "Fig 8", "smoke", tmp_path)["runs"] == [str(newer)]
