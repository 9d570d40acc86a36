"""The controls in a real browser: JupyterLab in headless Chromium runs a small notebook with
controls, a sweep and a figure; Run clicked twice gives the second run a live view of its
own (logs, Stop); the point tried lands in the figure; then a batch size of 0 (and 2.5) is
refused where it is typed, and a good one is taken again (one test: Run All's sweep is the
slow part, and one pass through it serves both)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from jupyter_pages import open_notebook, run_all, wait_idle
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOK = "controls.ipynb"
FIGURE_NAMES = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
  .map(p => (p.data || []).map(t => [t.name, Array.from(t.x || [])]))"""


def _open_and_run_all(page, lab_server) -> None:
    open_notebook(page, lab_server, NOTEBOOK)
    run_all(page)
    # the sweep's one box: its table says both points are done; then the figure
    page.locator(".distlab-sweep-header").get_by_text("2 of 2 done").wait_for(timeout=120_000)
    page.locator(".js-plotly-plot").first.wait_for(state="visible", timeout=60_000)
    wait_idle(page, 60_000)


def _shot(page, tmp_path: Path, name: str) -> None:
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)


def test_run_twice_then_a_refused_batch_size(lab_server, browser_page, tmp_path: Path) -> None:
    page = browser_page
    _open_and_run_all(page, lab_server)
    assert page.locator(".distlab-sweep-table tr").count() == 3  # a header and two points
    assert page.locator(".distlab-status").count() <= 1  # one view for the sweep, not two

    run = page.locator(".widget-button", has_text=re.compile(r"^\s*Run\s*$"))
    batch = page.locator(".widget-text", has_text="batch size").locator("input")
    status = run.locator("xpath=following-sibling::*[1]")

    batch.fill("12")
    run.click()
    status.get_by_text("done: succeeded").wait_for(timeout=120_000)
    _shot(page, tmp_path, "after-first-run")

    batch.fill("24")
    run.click()
    # the second click's view: its own logs and a Stop button while it runs
    view = page.locator(".jp-OutputArea-output .widget-tab").filter(has_text="of batch 24")
    view.get_by_text("rank 0 step 2 of batch 24").wait_for(state="visible", timeout=90_000)
    stop = page.locator(".widget-button", has_text="Stop").filter(visible=True)
    assert stop.count() == 1
    _shot(page, tmp_path, "second-run-running")
    status.get_by_text("done: succeeded").wait_for(timeout=120_000)
    assert "rank 0 done" in view.locator(".distlab-log").first.inner_text()
    tried = page.locator(".distlab-controls-history tr")
    expect(tried).to_have_count(3, timeout=10_000)  # a header and the two runs
    assert "batch_size=24" in tried.nth(2).inner_text()

    # the figure cell again: the two points tried are stars beside the sweep's two
    cell = page.locator(".jp-CodeCell").nth(2)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    page.wait_for_function(
        FIGURE_NAMES.replace("=> Array", "=> JSON.stringify(Array") + ").includes('tried in')",
        timeout=60_000,
    )
    traces = dict(page.evaluate(FIGURE_NAMES)[-1])
    assert traces["tried in the controls"] == [12, 24] and traces["sweep"] == [8, 16]
    _shot(page, tmp_path, "figure-with-tried-points")

    # a batch size of 0, then 2.5, is refused where it is typed; 16 is taken again
    batch.fill("0")
    refused = page.locator(".distlab-refused")
    refused.get_by_text("batch size: 0 is out of range").wait_for(state="visible")
    assert run.is_disabled()
    assert batch.input_value() == "0"  # not changed into 1
    batch.fill("2.5")
    refused.get_by_text("'2.5' is not a whole number").wait_for(state="visible")
    assert batch.input_value() == "2.5" and run.is_disabled()
    _shot(page, tmp_path, "batch-refused")
    batch.fill("16")
    page.wait_for_function(
        "() => !document.querySelector('.distlab-refused')"
        " || document.querySelector('.distlab-refused').textContent === ''"
    )
    assert run.is_enabled()
