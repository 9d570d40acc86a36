"""Whether a figure can be read at the size it is published (900×520 by default).

A figure whose legend carries a whole citation leaves a plot area of a few dozen pixels,
and a caption placed at a fixed paper fraction runs off the image; neither shows up as
an error anywhere. ``check_figure`` lists such problems from the figure's layout alone:

- the plot area (the union of the axes' domains, in pixels, after the margins and the
  room the legend takes) is under ``min_fraction`` of the image in either direction;
- a legend entry is longer than ``max_legend_chars``;
- a text (title, annotations — captions and subplot titles are annotations — and the
  legend box) runs outside the image or overlaps another text or the band under an
  x axis where its tick labels and title are drawn.

It is an estimate, not a rendering: text extents are font size × characters
(``figure_text``), margins follow plotly.js's defaults and its way of widening a margin to
make room for a legend outside the plot (``figure_frame``), and each text's box is placed
from the layout (``figure_boxes``). Other margin pushes (long tick labels, colour bars) are
not modelled, so a figure can pass here and still be cramped: look at its PNG too. This
module holds the rules; the estimates live in those three, and their public names are
re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lab.metrics.figure_boxes import text_boxes, x_axis_labels
from lab.metrics.figure_frame import DEFAULT_MARGIN, LEGEND_PAD, MIN_PLOT, Frame, frame, plot_area
from lab.metrics.figure_text import (
    CHAR_WIDTH,
    LEGEND_ITEM,
    LINE_HEIGHT,
    Box,
    legend_entries,
    plain,
    resolved,
    text_size,
)

__all__ = [
    "CHAR_WIDTH",
    "DEFAULT_MARGIN",
    "LEGEND_ITEM",
    "LEGEND_PAD",
    "LINE_HEIGHT",
    "MIN_PLOT",
    "TOLERANCE",
    "Box",
    "FigureUnreadable",
    "Frame",
    "assert_readable",
    "check_figure",
    "frame",
    "legend_entries",
    "plain",
    "plot_area",
    "resolved",
    "text_boxes",
    "text_size",
]


TOLERANCE = 2.0  # px a text may touch the edge or another text without counting


class FigureUnreadable(AssertionError):
    """A figure that fails ``check_figure``; ``problems`` lists why."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("figure cannot be read:\n- " + "\n- ".join(problems))
        self.problems = problems


def _pairs(items: list[Box]) -> Iterable[tuple[Box, Box]]:
    for i, a in enumerate(items):
        for b in items[i + 1 :]:
            yield a, b


def check_figure(
    fig: Any,
    width: float = 900,
    height: float = 520,
    min_fraction: float = 0.5,
    max_legend_chars: int = 40,
) -> list[str]:
    """What keeps ``fig`` from being read at ``width`` × ``height`` px; empty when nothing.

    The figure's own ``layout.width``/``height`` are ignored: it is judged at the size it
    will be written. See the module docstring for what is estimated and how.
    """
    fig = resolved(fig)
    problems: list[str] = []
    area = plot_area(fig, width, height)
    pw, ph = area.x1 - area.x0, area.y1 - area.y0
    if pw < min_fraction * width or ph < min_fraction * height:
        problems.append(
            f"plot area is {pw:.0f}×{ph:.0f} px of a {width:.0f}×{height:.0f} image "
            f"(under {min_fraction:.0%} of it in width or height)"
        )
    for entry in legend_entries(fig):
        if len(entry) > max_legend_chars:
            problems.append(
                f"legend entry of {len(entry)} characters (over {max_legend_chars}): "
                f"{entry[:60]!r}…"
            )
    boxes = text_boxes(fig, width, height)
    for box in boxes:
        out = box.outside(width, height)
        if out > TOLERANCE:
            problems.append(f"{box.name} runs {out:.0f} px outside the image")
    f = frame(fig, width, height)
    bands = [band for band, _ in x_axis_labels(fig, f) if band]
    for a, b in _pairs(boxes):
        if a.overlap(b) > TOLERANCE:
            problems.append(f"{a.name} overlaps {b.name}")
    for a in boxes:
        for band in bands:
            if a.overlap(band) > TOLERANCE:
                problems.append(f"{a.name} overlaps the {band.name}")
    return problems


def assert_readable(fig: Any, width: float = 900, height: float = 520, **kwargs: Any) -> Any:
    """Raise ``FigureUnreadable`` listing ``check_figure``'s problems; returns ``fig``."""
    problems = check_figure(fig, width, height, **kwargs)
    if problems:
        raise FigureUnreadable(problems)
    return fig
