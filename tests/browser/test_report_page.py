"""The reproduction report opens offline in headless Chromium: every link leads to a file
that exists and every figure image loads."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
import pytest

from lab.experiments import Status, Verdict, conclude
from lab.experiments.report import write_report

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_report_page_loads_with_links_and_figures(browser_page, tmp_path: Path) -> None:
    run = tmp_path / "runs" / "x" / "r1"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    fig = go.Figure(go.Bar(x=["a", "b"], y=[1, 2]))
    v = Verdict("KungFu (OSDI'20)", "Fig 9", "scales", Status.REPRODUCED, 1.0, runs=(str(run),))
    conclude(v, "kungfu", figure=fig, save_figure=True, results=tmp_path)
    assert not (tmp_path / "figures" / "kungfu" / "fig_9.png").exists()  # the report makes it
    page = browser_page
    page.goto(write_report(tmp_path).as_uri())
    assert (tmp_path / "figures" / "kungfu" / "fig_9.png").stat().st_size > 1000
    assert page.title() == "distlab reproduction report"
    hrefs = page.eval_on_selector_all("a", "els => els.map(e => e.href)")
    assert hrefs and all(Path(h.removeprefix("file://")).is_file() for h in hrefs)
    sizes = page.eval_on_selector_all("img", "els => els.map(e => e.naturalWidth)")
    assert sizes and all(w > 0 for w in sizes)
