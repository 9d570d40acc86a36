"""The figure check: unreadable figures (as the lab once drew them) fail, readable ones pass."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from lab.metrics.figure_check import (
    FigureUnreadable,
    assert_readable,
    check_figure,
    plot_area,
    text_size,
)

CITATION = (
    "KungFu sync-sgd (published: KungFu artifact README osdi20/README.md, github.com/lsds/"
    "KungFu at commit f8587e2; Fig 8 of the OSDI'20 paper, read off the plot)"
)


def _lines(*names: str) -> go.Figure:
    fig = go.Figure(
        [go.Scatter(x=[1, 2, 4], y=[10, 19, 36], name=n) for n in names],
        layout={"template": "plotly_white", "title": "Throughput vs workers"},
    )
    return fig


def test_a_legend_holding_a_citation_fails_on_plot_area_and_entry_length() -> None:
    fig = _lines(CITATION, "Horovod · resnet50")
    problems = check_figure(fig)
    assert any(p.startswith("plot area is") for p in problems), problems
    assert any("legend entry of" in p for p in problems), problems
    area = plot_area(fig)
    assert area.x1 - area.x0 < 100  # plotly squeezes it to its 64-px floor


def test_a_short_legend_passes() -> None:
    assert check_figure(_lines("KungFu · resnet50", "Horovod · resnet50")) == []


def test_an_entry_just_over_forty_characters_fails_alone() -> None:
    problems = check_figure(_lines("x" * 41, "y"), width=1800)
    assert problems == [
        "legend entry of 41 characters (over 40): 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'…"
    ]


def test_a_one_line_caption_at_a_fixed_paper_fraction_runs_off_the_image() -> None:
    fig = _lines("a", "b")
    fig.add_annotation(
        text="Lab: measured at scale 'smoke' on test CPU, 2 cores; no GPU, 2025-01-02. "
        "Published: KungFu artifact README, github.com/lsds/KungFu",
        xref="paper",
        yref="paper",
        x=0,
        y=-0.22,
        xanchor="left",
        yanchor="top",
        showarrow=False,
    )
    problems = check_figure(fig)
    assert any("outside the image" in p and "annotation 0" in p for p in problems), problems


def test_a_wrapped_caption_inside_the_bottom_margin_passes() -> None:
    fig = _lines("a", "b")
    fig.update_layout(margin={"b": 130})
    fig.add_annotation(
        text="Lab: measured at scale 'smoke' on test CPU, 2 cores; no GPU,<br>2025-01-02.",
        xref="paper",
        yref="paper",
        x=0,
        y=-0.2,
        xanchor="left",
        yanchor="top",
        showarrow=False,
    )
    assert check_figure(fig) == []


def test_a_title_wider_than_the_image_fails() -> None:
    fig = _lines("a", "b")
    fig.update_layout(title="A title that says everything about the run " * 3)
    assert any(p.startswith("title runs") for p in check_figure(fig))


def test_two_labels_at_one_data_point_overprint() -> None:
    fig = _lines("a", "b")
    for text in ("95 % before", "95 % before"):
        fig.add_annotation(x=2, y=19, text=text, showarrow=False)
    assert "annotation 0 ('95 % before') overlaps annotation 1 ('95 % before')" in (
        check_figure(fig)
    )


def test_labels_at_distant_data_points_do_not_overlap() -> None:
    fig = _lines("a", "b")
    fig.add_annotation(x=1, y=10, text="95 % before", showarrow=False)
    fig.add_annotation(x=4, y=36, text="95 % before", showarrow=False)
    assert check_figure(fig) == []


def _panels(spacing: float) -> go.Figure:
    fig = make_subplots(
        rows=4, cols=1, subplot_titles=["noise", "loss", "batch", "lr"], vertical_spacing=spacing
    )
    for row in range(1, 5):
        fig.add_trace(go.Scatter(x=[0, 100], y=[0, 1], name=f"p{row}"), row=row, col=1)
        fig.update_xaxes(title_text="step", row=row, col=1)
    fig.update_layout(template="plotly_white", showlegend=False, height=900)
    return fig


def test_stacked_panels_whose_titles_sit_on_the_axis_above_fail() -> None:
    problems = check_figure(_panels(0.04), height=900)
    assert any("overlaps the xaxis" in p for p in problems), problems


def test_stacked_panels_with_room_between_them_pass() -> None:
    assert check_figure(_panels(0.12), height=900) == []


def test_assert_readable_raises_with_the_problems() -> None:
    with pytest.raises(FigureUnreadable) as info:
        assert_readable(_lines(CITATION, "b"))
    assert info.value.problems and "plot area" in str(info.value)
    fig = _lines("a", "b")
    assert assert_readable(fig) is fig


def test_text_size_counts_the_longest_line_and_ignores_markup() -> None:
    w, h = text_size("<b>abcd</b><br>ab", 10)
    assert w == pytest.approx(4 * 0.6 * 10)
    assert h == pytest.approx(2 * 1.3 * 10)
