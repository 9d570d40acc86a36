"""The reproduction report opens offline in headless Chromium at 1400x1000: it fits the
window with no horizontal scroll (folded details open or not), every figure image is at
least 600 px wide and loads, and every link leads to a file that exists."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import plotly.graph_objects as go
import pytest

from lab.experiments import Status, Verdict, conclude
from lab.experiments.report import write_report

pytestmark = [pytest.mark.browser, pytest.mark.slow]

KUNGFU, P3, CMDARE = "KungFu (OSDI'20)", "P3 (SysML'19)", "CM-DARE (ICDCS'20)"
SOURCE = (  # as long as the longest published source the lab cites
    "KungFu artifact README osdi20/README.md, github.com/lsds/KungFu at commit f8587c1, "
    "'Figure 9: scalability' table, 32 workers, ResNet-50 synthetic data, img/s per worker, "
    "read from the throughput column of the sync-sgd row, 2020"
)


def _runs(results: Path, experiment: str, n: int) -> tuple[str, ...]:
    runs = []
    for i in range(n):
        run = results / "runs" / experiment / f"20250501-1203{i:02d}-{i:04x}abcd"
        run.mkdir(parents=True)
        (run / "manifest.json").write_text("{}")
        runs.append(str(run))
    return tuple(runs)


def _figure(title: str, workers: list[int]) -> go.Figure:
    fig = go.Figure()
    for system, scale in (("KungFu · resnet", 1.0), ("Horovod · resnet", 0.8)):
        fig.add_scatter(x=workers, y=[w * 900 * scale for w in workers], name=system)
    fig.update_layout(title=title, xaxis_title="workers", yaxis_title="img/s (all workers)")
    return fig


def _results(results: Path) -> None:
    """A results folder as a day of notebook runs leaves it: two scales of one figure, a
    figure with several claims, a verdict whose figure came from other runs, many runs."""
    smoke = _runs(results, "kungfu-fig9", 14)
    fig9 = Verdict(KUNGFU, "Fig 9", "actual throughput stays near ideal", Status.NOT_RESOLVED,
                   0.81, 0.12, 0.9, SOURCE, "× ideal", "smoke", "2-core CPU, emulated hosts",
                   "the interval spans the published ratio and 1.0; " * 4, smoke)  # fmt: skip
    conclude(fig9, "kungfu", _figure("Fig 9 · smoke", [1, 2, 4]), results=results)
    paper = _runs(results, "kungfu-fig9-paper", 3)
    conclude(
        Verdict(KUNGFU, "Fig 9", "actual throughput stays near ideal", Status.REPRODUCED, 0.88,
                0.03, 0.9, SOURCE, "× ideal", "paper", "8 × V100", "within 3%", paper),
        "kungfu",
        _figure("Fig 9 · paper", [8, 16, 32]),
        results=results,
    )  # fmt: skip
    fig8 = _runs(results, "kungfu-fig8", 4)
    claims = [
        Verdict(KUNGFU, "Fig 8", f"monitor {i} costs little", status, 0.03 * i, 0.01, 0.046,
                SOURCE, "fraction", "smoke", "2-core CPU", "computed", fig8)
        for i, status in enumerate((Status.REPRODUCED, Status.NOT_REPRODUCED), 1)
    ]  # fmt: skip
    conclude(claims, "kungfu", _figure("Fig 8", [1, 2]), results=results)
    p3 = _runs(results, "p3", 2)
    conclude(
        Verdict(P3, "throughput vs bandwidth", "priority propagation gains at low bandwidth",
                Status.REPRODUCED, 1.3, 0.1, 1.25, "P3 paper, Fig 6", "×", "smoke", runs=p3),
        "p3",
        _figure("P3", [1, 2]),
        results=results,
    )  # fmt: skip
    # saved again from other runs with no figure: the old figure must not be shown
    other = _runs(results, "cmdare", 2)
    lifetimes = Verdict(CMDARE, "lifetimes", "156 instances", Status.REPRODUCED, 156.0,
                        runs=other[:1], scale="paper")  # fmt: skip
    conclude(lifetimes, "cmdare", _figure("lifetimes", [1]), results=results)
    conclude(replace(lifetimes, runs=other[1:]), "cmdare", results=results)


FITS = "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
IMAGES = """els => els.map(e => [e.getBoundingClientRect().width, e.naturalWidth,
                                   e.closest('a').getAttribute('href')])"""


def test_report_fits_1400_px_with_readable_figures(browser_page, tmp_path: Path) -> None:
    results = tmp_path / "results"
    _results(results)
    page = browser_page
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(write_report(results).as_uri())
    assert page.title() == "distlab reproduction report"
    scroll, client = page.evaluate(FITS)
    assert scroll <= client, f"document is {scroll} px wide in a {client} px window"
    images = page.eval_on_selector_all("img", IMAGES)
    assert len(images) == 3, images  # Fig 9 (paper, the latest), Fig 8, P3; lifetimes refused
    for width, natural, href in images:
        assert width >= 600 and natural > 0, (width, natural, href)
        assert href.endswith(".html") and (results / href).is_file()
    assert "paper scale, drawn from the 3 runs of its verdict" in page.inner_text("body")
    assert "Figure withheld: it was drawn from 1 run" in page.inner_text("#cmdare-lifetimes")
    page.eval_on_selector_all("details", "els => els.forEach(e => e.open = true)")
    scroll, client = page.evaluate(FITS)
    assert scroll <= client, f"with details open: {scroll} px wide in a {client} px window"
    hrefs = page.eval_on_selector_all("a", "els => els.map(e => e.href)")
    assert hrefs and all(Path(h.removeprefix("file://")).is_file() for h in hrefs)
    page.eval_on_selector_all("details", "els => els.forEach(e => e.open = false)")
    page.screenshot(path=str(tmp_path / "report.png"), full_page=False)
