"""The live run view in a real browser: JupyterLab in headless Chromium runs a 2-rank
notebook, and the page shows both ranks' lines, the final status and the plot."""

from __future__ import annotations

import pytest
from jupyter_pages import open_notebook, run_all

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOK = "two_ranks.ipynb"


def test_two_rank_run_in_jupyterlab(lab_server, browser_page) -> None:
    page = browser_page
    open_notebook(page, lab_server, NOTEBOOK)
    run_all(page)

    view = page.locator(".jp-OutputArea-output .widget-tab")
    view.get_by_text("rank 0 says hello 0").wait_for(state="visible", timeout=90_000)
    status = page.locator(".distlab-status").first
    status.get_by_text("running").or_(status.get_by_text("succeeded")).wait_for()

    # The cell returns once the ranks have ended; the view then shows the final state.
    page.get_by_text("run state: succeeded").wait_for(timeout=90_000)
    page.locator(".distlab-status").get_by_text("succeeded").first.wait_for(state="visible")
    assert "samples/s" in status.inner_text()

    log0 = view.locator(".distlab-log").first
    assert "rank 0 done" in log0.inner_text()
    assert "rank 1" not in log0.inner_text()

    view.get_by_role("tab", name="rank 1").click()
    rank1 = view.get_by_text("rank 1 says hello 0")
    rank1.wait_for(state="visible")
    assert "rank 1 done" in view.locator(".distlab-log").nth(1).inner_text()

    traces = page.locator(".js-plotly-plot .scatterlayer .trace")
    traces.nth(1).wait_for(state="visible")
    assert traces.count() == 2  # one line per rank


def test_stop_button_ends_the_run(lab_server, browser_page, tmp_path) -> None:
    page = browser_page
    open_notebook(page, lab_server, "stop_run.ipynb")
    run_all(page)

    view = page.locator(".jp-OutputArea-output .widget-tab")
    view.get_by_text("rank 0 says hello 2").wait_for(state="visible", timeout=90_000)
    page.locator(".widget-button", has_text="Stop").click()

    # The ranks would say hello 1000 times; the click ends them while the cell blocks.
    page.get_by_text("run state: cancelled").wait_for(timeout=120_000)
    page.locator(".distlab-status").get_by_text("cancelled").first.wait_for(state="visible")
    assert "rank 0 says hello 999" not in view.locator(".distlab-log").first.inner_text()
    # the reason first, in words; the signal that ended the ranks folded under it
    headline = page.locator(".distlab-status b").first
    assert headline.inner_text() == "stopped from the view (cancelled)"
    assert "-15" not in headline.inner_text()
    page.screenshot(path=str(tmp_path / "after-stop.png"), full_page=True)
