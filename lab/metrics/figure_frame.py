"""Where a figure's plotting region lands, in pixels, after the margins and the legend. The
margins are plotly.js's defaults, widened as plotly.js widens them to make room for a legend
outside the plot; the plot area is the union of the axes' domains inside them. Other margin
pushes (long tick labels, colour bars) are not modelled. Part of the figure check
(``figure_check``), from the text sizes of ``figure_text``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lab.metrics.figure_text import Box, legend_box_size, legend_entries, lookup, resolved

DEFAULT_MARGIN = {"l": 80, "r": 80, "t": 100, "b": 80}
LEGEND_PAD = 12.0  # plotly keeps an outside legend this far from the image's edge
MIN_PLOT = 64.0  # plotly.js never shrinks a plot area below this when widening margins


def axes_of(layout: Any, letter: str) -> Iterator[tuple[str, Any]]:
    for key in layout:
        if re.fullmatch(letter + r"axis\d*", key):
            axis = layout[key]
            if axis is not None:
                yield key, axis
    if not any(re.fullmatch(letter + r"axis\d*", k) for k in layout):
        yield letter + "axis", None


def axis_named(layout: Any, name: str) -> Any:
    """``layout``'s axis ``name`` ("xaxis2"), or None where the layout has none."""
    try:
        return layout[name]
    except (KeyError, ValueError):
        return None


def _domain_union(layout: Any, letter: str) -> tuple[float, float]:
    lo, hi = 1.0, 0.0
    for _, axis in axes_of(layout, letter):
        if axis is not None and axis.overlaying:
            continue
        d = lookup(axis, "domain", default=(0.0, 1.0))
        lo, hi = min(lo, float(d[0])), max(hi, float(d[1]))
    return (lo, hi) if hi > lo else (0.0, 1.0)


@dataclass(frozen=True)
class Frame:
    """Where the margins put the plotting region, px: ``l``, ``t`` its top-left corner,
    ``w``, ``h`` its size (axis domains are fractions of it)."""

    l: float  # noqa: E741
    t: float
    w: float
    h: float

    def x(self, frac: float) -> float:
        return self.l + frac * self.w

    def y(self, frac: float) -> float:
        return self.t + (1.0 - frac) * self.h


def _legend_anchor(ref: str, pos: float, anchor: str | None, vertical: bool) -> str:
    if anchor and anchor != "auto":
        return anchor
    lo, mid, hi = ("top", "middle", "bottom") if vertical else ("left", "center", "right")
    if vertical:
        return hi if pos <= 1 / 3 else (lo if pos >= 2 / 3 else mid)
    return lo if pos <= 1 / 3 else (hi if pos >= 2 / 3 else mid)


def legend_layout(fig: Any, width: float, height: float) -> dict[str, Any] | None:
    entries = legend_entries(fig)
    if not entries:
        return None
    legend = fig.layout.legend
    horizontal = lookup(legend, "orientation") == "h"
    lw, lh = legend_box_size(fig, entries, width)
    x = lookup(legend, "x", default=0.0 if horizontal else 1.02)
    y = lookup(legend, "y", default=-0.1 if horizontal else 1.0)
    xanchor = lookup(legend, "xanchor", default="left")
    yanchor = lookup(legend, "yanchor", default="top" if horizontal else "auto")
    return {
        "w": lw,
        "h": lh,
        "x": float(x),
        "y": float(y),
        "xanchor": _legend_anchor("", float(x), xanchor, False),
        "yanchor": _legend_anchor("", float(y), yanchor, True),
        "xref": lookup(legend, "xref", default="paper"),
        "yref": lookup(legend, "yref", default="paper"),
    }


def frame(fig: Any, width: float, height: float) -> Frame:
    """The plotting region after the layout's margins and the legend's push (see module doc)."""
    margin = {
        k: float(lookup(fig.layout, "margin", k, default=v)) for k, v in DEFAULT_MARGIN.items()
    }
    ml, mr, mt, mb = margin["l"], margin["r"], margin["t"], margin["b"]
    leg = legend_layout(fig, width, height)
    if leg and lookup(fig.layout, "margin", "autoexpand") is not False:
        if leg["xref"] == "paper":
            xf, w = leg["x"], leg["w"] + LEGEND_PAD
            right = w if leg["xanchor"] == "left" else w / 2 if leg["xanchor"] == "center" else 0
            left = w - right
            if right and xf > 0:
                mr = max(mr, (right - (1 - xf) * (width - ml)) / xf)
            if left and xf < 1:
                ml = max(ml, (left - xf * (width - mr)) / (1 - xf))
        if leg["yref"] == "paper":
            yf, h = leg["y"], leg["h"]
            below = h if leg["yanchor"] == "top" else h / 2 if leg["yanchor"] == "middle" else 0
            above = h - below
            if below and yf < 1:
                mb = max(mb, (below - yf * (height - mt)) / (1 - yf))
            if above and yf > 0:
                mt = max(mt, (above - (1 - yf) * (height - mb)) / yf)
    w = max(width - ml - mr, MIN_PLOT)
    h = max(height - mt - mb, MIN_PLOT)
    return Frame(min(ml, width - w), min(mt, height - h), w, h)


def plot_area(fig: Any, width: float = 900, height: float = 520) -> Box:
    """The union of the axes' domains in image pixels."""
    fig = resolved(fig)
    f = frame(fig, width, height)
    x0, x1 = _domain_union(fig.layout, "x")
    y0, y1 = _domain_union(fig.layout, "y")
    return Box("plot area", f.x(x0), f.y(y1), f.x(x1), f.y(y0))
