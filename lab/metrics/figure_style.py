"""One look for every figure, so that each reads at a glance at 900×520 px.

A builder draws its traces with short names ("system · model") and calls ``style`` last:
it fixes the size, fits the title (wrapped, at most two lines), lays the legend out where
it leaves the plot area most of the image, puts each published value's source into its
hover text and one footnote (never the legend), wraps the caption to the image's width
inside the image, and computes the margins that make room for all of it.
``lab.metrics.figure_check`` then says whether the result can be read.
"""

from __future__ import annotations

import logging
import math
import re
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

from lab.metrics.figure_check import CHAR_WIDTH, LINE_HEIGHT, legend_entries, plain

log = logging.getLogger(__name__)

WIDTH, HEIGHT = 900, 520
# the plot area keeps at least this share of the image's height: legend rows, caption and
# footnote beyond that make the image taller instead (figure_check asks for half)
MIN_PLOT_SHARE = 0.55
MAX_LEGEND = 40  # characters of a legend entry
FONT = 12
TITLE_SIZE = 16
SUBTITLE_SIZE = 13
CAPTION_SIZE = 11
FOOTNOTE_SIZE = 10
EDGE = 10  # px kept free at the image's edges
CAPTION_COLOR = "#444"
VERTICAL_LEGEND_CHARS = 26  # longer entries go into a horizontal legend above the plot
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
          "#17becf", "#bcbd22", "#7f7f7f")  # fmt: skip
PUBLISHED_COLOR = "#555555"


def series_name(*parts: Any) -> str:
    """A legend entry from its parts, ``"Horovod (MPI) · ResNet50"``, at most ``MAX_LEGEND``
    characters (longer ones are cut with an ellipsis)."""
    text = " · ".join(str(p) for p in parts if p is not None and str(p) != "")
    return shorten(text)


def shorten(text: str, limit: int = MAX_LEGEND) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def short_source(source: str, limit: int = 160) -> str:
    """A source as a footnote can hold it: without commit hashes, branch names and quoted
    passages, cut to ``limit`` characters (the full text stays in the hover text)."""
    text = re.sub(r'[:,]?\s*"[^"]{30,}"', "", str(source))  # a quoted passage
    text = re.sub(r"\s*(at )?(commit |@)[0-9a-f]{7,40}\b", "", text)
    text = re.sub(r"\s*\([^()]*branch\)", "", text)
    text = re.sub(r"(,\s*)+,", ",", text).strip(" ,")
    return shorten(text, limit)


def wrap(text: str, width_px: float, size: float) -> list[str]:
    """``text`` broken into lines that fit ``width_px`` at font ``size`` (the check's
    estimate of a character's width, so a wrapped text passes the check)."""
    per_line = max(10, int(width_px / (CHAR_WIDTH * size)))
    lines: list[str] = []
    for para in plain(text).split("\n"):
        lines += textwrap.wrap(para, per_line, break_long_words=True) or [""]
    return lines


def _height(lines: int, size: float) -> float:
    return lines * LINE_HEIGHT * size


def published_traces(fig: Any) -> list[Any]:
    """The traces of ``fig`` that show published numbers (``meta={"published": True}``)."""
    return [t for t in fig.data if isinstance(t.meta, dict) and t.meta.get("published")]


def _sources_of(trace: Any) -> list[str]:
    src = trace.meta.get("source") if isinstance(trace.meta, dict) else None
    if not src:
        return []
    return [str(s) for s in src] if isinstance(src, (list, tuple)) else [str(src)]


def _hover_published(fig: Any) -> list[str]:
    """Each published trace's source into its hover text; returns every source once."""
    found: list[str] = []
    for t in published_traces(fig):
        srcs = _sources_of(t)
        found += srcs
        if t.hovertemplate or not srcs:
            continue
        where = "<br>".join(
            "<br>".join(textwrap.wrap("published: " + s, 70)) for s in dict.fromkeys(srcs)
        )
        value = "%{y:.4g}" if t.type != "bar" or t.orientation != "h" else "%{x:.4g}"
        t.hovertemplate = f"%{{x}}: {value}<br>{where}<extra>{t.name or ''}</extra>"
    return list(dict.fromkeys(found))


def _drawn_as(fig: Any) -> str:
    """How the published values are drawn, for the footnote: " (hatched bars; …)"."""
    kinds = {"hatched bars" if t.type == "bar" else "hollow markers" for t in published_traces(fig)}
    return f" ({', '.join(sorted(kinds))}; full source on hover)" if kinds else ""


def _shorten_legend(fig: Any) -> None:
    for t in fig.data:
        name = plain(t.name) if t.name is not None else ""
        if len(name) > MAX_LEGEND:
            log.debug("legend entry cut to %d characters: %s", MAX_LEGEND, name)
            if not t.hovertemplate:
                t.hovertext = name
            t.name = shorten(name)


def _subplot_titles(fig: Any) -> list[Any]:
    """The annotations ``make_subplots`` wrote as panel titles."""
    return [
        a
        for a in fig.layout.annotations
        if a.xref == "paper"
        and a.yref == "paper"
        and a.yanchor == "bottom"
        and a.showarrow is False
        and a.name != "caption"
    ]


def _above_plot(fig: Any) -> float:
    """Room (px) that panel titles and labels sitting on the plot's top edge need."""
    need = 0.0
    for a in fig.layout.annotations:
        if a.yref in ("paper", "y domain") and (a.y or 0) >= 0.98 and a.yanchor == "bottom":
            size = a.font.size or FONT
            need = max(need, _height(plain(a.text).count("\n") + 1, size) + 4)
    return need


def _bottom_axes(fig: Any) -> list[Any]:
    out = []
    for key in fig.layout:
        if re.fullmatch(r"xaxis\d*", key):
            axis = fig.layout[key]
            if axis.visible is not False and axis.side != "top" and not axis.overlaying:
                out.append(axis)
    return out or [fig.layout.xaxis]


def _wrap_category_ticks(fig: Any, plot_w: float) -> int:
    """Break long category labels over lines so that they stay level; returns the most
    lines a label takes."""
    most = 1
    for key in [k for k in fig.layout if re.fullmatch(r"xaxis\d*", k)]:
        axis = fig.layout[key]
        short = "x" + key[5:]
        cats: list[str] = []
        for t in fig.data:
            if (t.xaxis or "x") != short or t.x is None or (t.orientation == "h"):
                continue
            cats += [c for c in map(str, t.x) if not _numeric(c)]
        cats = list(dict.fromkeys(cats))
        if not cats or axis.tickvals is not None:
            continue
        span = (axis.domain or (0, 1))[1] - (axis.domain or (0, 1))[0]
        slot = plot_w * span / len(cats)
        if max(len(c) for c in cats) * CHAR_WIDTH * FONT <= slot:
            continue
        text = ["<br>".join(wrap(c, slot - 6, FONT)) for c in cats]
        axis.update(tickvals=cats, ticktext=text, tickangle=0)
        most = max(most, *(s.count("<br>") + 1 for s in text))
    return most


def _numeric(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _axis_band(fig: Any, tick_lines: int) -> float:
    """Depth (px) under the lowest x axes taken by tick labels and axis titles."""
    depth = 0.0
    for axis in _bottom_axes(fig):
        d = tick_lines * FONT * 1.4 + 6 if axis.showticklabels is not False else 0
        if axis.title.text:
            d += 15 + _height(plain(axis.title.text).count("\n") + 1, FONT * 1.17)
        depth = max(depth, d)
    return depth


def _note(fig: Any, lines: list[str], size: float, name: str, yshift: float, xshift: float) -> None:
    fig.add_annotation(
        text="<br>".join(lines),
        name=name,
        xref="paper",
        yref="paper",
        x=0,
        y=0,
        xanchor="left",
        yanchor="top",
        xshift=xshift,
        yshift=-yshift,
        showarrow=False,
        align="left",
        font={"size": size, "color": CAPTION_COLOR},
    )


def _drop_notes(fig: Any) -> None:
    fig.layout.annotations = [a for a in fig.layout.annotations if a.name not in NOTES]


NOTES = ("caption", "sources")


def style(
    fig: Any,
    caption: str | None = None,
    sources: Iterable[str] = (),
    title: str | None = None,
    width: int = WIDTH,
    height: int = HEIGHT,
    legend: str = "auto",
) -> Any:
    """Give ``fig`` the lab's one look (module docstring); returns ``fig``.

    Args:
        caption: where and when the lab measured (``figures.caption``), wrapped inside
            the image under the plot.
        sources: sources of published values drawn; added to those found on published
            traces (``meta={"published": True, "source": ...}``), shown as one footnote.
        title: replaces the figure's title.
        width, height: the size the figure is drawn and published at.
        legend: "auto", "right" (a column beside the plot) or "top" (rows above it).
    """
    _drop_notes(fig)
    if title is not None:
        fig.update_layout(title_text=title)
    before = fig.layout.to_plotly_json()  # what a taller second pass starts from
    fig.update_layout(
        template="plotly_white", width=width, height=height, font={"size": FONT}, autosize=False
    )
    for a in _subplot_titles(fig):
        a.font.size = SUBTITLE_SIZE
    _shorten_legend(fig)
    found = _hover_published(fig)
    srcs = list(dict.fromkeys([*sources, *found]))
    inner = width - 2 * EDGE

    top = EDGE
    text = plain(fig.layout.title.text or "")
    if text:
        size = TITLE_SIZE
        lines = wrap(text, inner, size)
        if len(lines) > 2:
            size = 14
            lines = wrap(text, inner, size)
        fig.update_layout(
            title={
                "text": "<br>".join(lines),
                "x": EDGE / width,
                "xanchor": "left",
                "xref": "container",
                "y": 1 - top / height,
                "yanchor": "top",
                "yref": "container",
                "font": {"size": size},
            }
        )
        top += _height(len(lines), size) + 6

    entries = legend_entries(fig)
    longest = max([len(e) for e in entries] + [0])
    where = legend
    if where == "auto":
        where = "right" if longest <= VERTICAL_LEGEND_CHARS and len(entries) <= 10 else "top"
    right = 20.0
    if entries and where == "top":
        rows = _legend_rows(entries, inner)
        fig.update_layout(
            legend={
                "orientation": "h",
                "x": EDGE / width,
                "xanchor": "left",
                "xref": "container",
                "y": 1 - top / height,
                "yanchor": "top",
                "yref": "container",
                # flat rows: grouped, plotly stacks each group's entries in a column
                "traceorder": "normal",
            }
        )
        top += rows * 19 + 10
    elif entries:
        fig.update_layout(
            legend={
                "orientation": "v",
                "x": 1.02,
                "xanchor": "left",
                "y": 1,
                "yanchor": "top",
                "xref": "paper",
                "yref": "paper",
            }
        )
    top += _above_plot(fig)
    top = max(top + 8, 30)

    left = 70.0
    plot_w = width - left - right - (longest * CHAR_WIDTH * FONT + 60 if where == "right" else 0)
    tick_lines = _wrap_category_ticks(fig, max(plot_w, 100))
    band = _axis_band(fig, tick_lines) + 6
    cap_lines = wrap(caption, inner, CAPTION_SIZE) if caption else []
    src_lines: list[str] = []
    if srcs:
        words = f"Published values{_drawn_as(fig)}: "
        src_lines = wrap(words + "; ".join(short_source(s) for s in srcs), inner, FOOTNOTE_SIZE)
        if len(src_lines) > 2:
            src_lines = [*src_lines[:1], shorten(src_lines[1], len(src_lines[0]))]
    bottom = band
    if cap_lines:
        _note(fig, cap_lines, CAPTION_SIZE, "caption", bottom, EDGE - left)
        bottom += _height(len(cap_lines), CAPTION_SIZE) + 4
    if src_lines:
        _note(fig, src_lines, FOOTNOTE_SIZE, "sources", bottom, EDGE - left)
        bottom += _height(len(src_lines), FOOTNOTE_SIZE) + 4
    fig.update_layout(margin={"l": left, "r": right, "t": math.ceil(top), "b": bottom + EDGE})
    around = math.ceil(top) + bottom + EDGE
    if around > (1 - MIN_PLOT_SHARE) * height:  # a long legend or caption: a taller image
        fig.layout = before  # unwrapped ticks and title again: the pass measures them anew
        taller = math.ceil(around / (1 - MIN_PLOT_SHARE))
        return style(fig, caption, sources, None, width, taller, legend)
    return fig


def _legend_rows(entries: Sequence[str], width: float) -> int:
    x, rows = 0.0, 1
    for entry in entries:
        w = 45 + len(entry) * CHAR_WIDTH * FONT
        if x and x + w > width:
            rows, x = rows + 1, 0.0
        x += w
    return rows


def add_caption(fig: Any, text: str | None) -> Any:
    """Write ``text`` under the plot area, wrapped to the image's width, and widen the
    bottom margin to hold it (without the rest of ``style``); returns ``fig``."""
    _drop_notes(fig)
    if not text:
        return fig
    width = fig.layout.width or WIDTH
    left = fig.layout.margin.l if fig.layout.margin.l is not None else 80
    lines = wrap(text, width - 2 * EDGE, CAPTION_SIZE)
    band = _axis_band(fig, 1) + 6
    _note(fig, lines, CAPTION_SIZE, "caption", band, EDGE - left)
    fig.update_layout(margin={"b": band + _height(len(lines), CAPTION_SIZE) + 4 + EDGE})
    return fig
