"""How big a figure's texts are, estimated from its layout alone. A character is
``CHAR_WIDTH`` × the font size wide (Open Sans averages about 0.5 for prose and 0.6 for wide
letters, measured against Chromium's SVG boxes, so long text is over- rather than
under-estimated) and a line ``LINE_HEIGHT`` × the font size high; the legend's entries and box
follow from them. The lowest floor of the figure check (``figure_check``), kept apart so the
estimates can be tuned without touching the rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

CHAR_WIDTH = 0.6
LINE_HEIGHT = 1.3
LEGEND_ITEM = 45.0  # symbol, gap and padding beside each legend text, px at 12 px font


@dataclass(frozen=True)
class Box:
    """A named rectangle in image pixels (y grows downwards)."""

    name: str
    x0: float
    y0: float
    x1: float
    y1: float

    def overlap(self, other: Box) -> float:
        """Smaller side of the intersection, px (≤ 0: apart)."""
        dx = min(self.x1, other.x1) - max(self.x0, other.x0)
        dy = min(self.y1, other.y1) - max(self.y0, other.y0)
        return min(dx, dy)

    def outside(self, width: float, height: float) -> float:
        """How far (px) the box reaches beyond the image on its worst side."""
        return max(-self.x0, -self.y0, self.x1 - width, self.y1 - height)


def plain(text: Any) -> str:
    """``text`` without HTML tags or entities, ``<br>`` kept as newlines."""
    s = re.sub(r"<br\s*/?>", "\n", str(text or ""), flags=re.I)
    s = re.sub(r"<[^>]+>", "", s)
    return re.sub(r"&[a-z#0-9]+;", "x", s)


def text_size(text: Any, size: float) -> tuple[float, float]:
    """Estimated (width, height) in px of ``text`` at font ``size`` (see module doc)."""
    lines = plain(text).split("\n")
    return (
        max(len(line) for line in lines) * CHAR_WIDTH * size,
        len(lines) * LINE_HEIGHT * size,
    )


def lookup(obj: Any, *path: str, default: Any = None) -> Any:
    for key in path:
        if obj is None:
            return default
        obj = getattr(obj, key, None) if not isinstance(obj, dict) else obj.get(key)
    return default if obj is None else obj


def font_size_of(font: Any, layout: Any, default: float | None = None) -> float:
    base = float(lookup(layout, "font", "size", default=12))
    return float(lookup(font, "size", default=default if default is not None else base))


def resolved(fig: Any) -> Any:
    """``fig`` with its template's layout values written into its own layout (a copy), so
    that defaults a template sets (the title's x, axis title standoffs) are read too."""
    import plotly.graph_objects as go

    layout = fig.layout.to_plotly_json()
    template = layout.pop("template", None) or {}
    merged = go.Layout(template.get("layout", {}))
    merged.update(layout)
    return go.Figure(data=fig.data, layout=merged)


def legend_entries(fig: Any) -> list[str]:
    """The legend's entries as plain text (empty when the legend is hidden)."""
    shown = [
        t
        for t in fig.data
        if lookup(t, "showlegend") is not False and lookup(t, "visible") is not False
    ]
    explicit = fig.layout.showlegend
    if explicit is False:
        return []
    if explicit is None and len(shown) < 2 and not any(t.showlegend for t in shown):
        return []
    return [plain(t.name if t.name is not None else f"trace {i}") for i, t in enumerate(shown)]


def legend_box_size(fig: Any, entries: list[str], width: float) -> tuple[float, float]:
    size = font_size_of(lookup(fig.layout, "legend", "font"), fig.layout)
    k = size / 12.0
    row = 19.0 * k
    title = plain(lookup(fig.layout, "legend", "title", "text", default=""))
    if lookup(fig.layout, "legend", "orientation") == "h":
        x, rows, widest = 0.0, 1, 0.0
        for entry in entries:
            w = LEGEND_ITEM * k + len(entry) * CHAR_WIDTH * size
            if x and x + w > width:
                rows, x = rows + 1, 0.0
            x += w
            widest = max(widest, x)
        if title:
            widest += len(title) * CHAR_WIDTH * size
        return min(widest, width), rows * row + 10
    longest = max([len(e) for e in entries] + [0])
    w = LEGEND_ITEM * k + longest * CHAR_WIDTH * size
    if title:
        w = max(w, len(title) * CHAR_WIDTH * size + 10)
    return w, len(entries) * row + 10 + (row if title else 0)
