"""Where each of a figure's texts lands, in pixels. The title, every annotation (captions
and subplot titles are annotations), the legend box, and under each bottom x axis the band of
its tick labels and its title. Annotations placed on a data axis are located from the axis
range, or from the data's extent where the range is automatic (numeric axes only; others are
skipped). The figure check (``figure_check``) judges these boxes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from lab.metrics.figure_frame import Frame, axes_of, axis_named, frame, legend_layout
from lab.metrics.figure_text import Box, font_size_of, lookup, plain, resolved, text_size


def _anchored(pos: float, size: float, anchor: str) -> tuple[float, float]:
    if anchor in ("left", "top"):
        return pos, pos + size
    if anchor in ("right", "bottom"):
        return pos - size, pos
    return pos - size / 2, pos + size / 2


def _auto(frac: float, anchor: str | None, lo: str, mid: str, hi: str) -> str:
    if anchor and anchor != "auto":
        return anchor
    return lo if frac <= 1 / 3 else (hi if frac >= 2 / 3 else mid)


def _title_box(fig: Any, width: float, height: float, f: Frame) -> Box | None:
    title = fig.layout.title
    text = lookup(title, "text")
    if not text:
        return None
    size = font_size_of(lookup(title, "font"), fig.layout, default=None)
    if lookup(title, "font", "size") is None:
        size = 1.4 * float(lookup(fig.layout, "font", "size", default=12))
    w, h = text_size(text, size)
    xf = float(lookup(title, "x", default=0.5))
    xref = lookup(title, "xref", default="container")
    px = xf * width if xref == "container" else f.x(xf)
    xa = _auto(xf, lookup(title, "xanchor"), "left", "center", "right")
    yv = lookup(title, "y", default="auto")
    if yv == "auto" or yv is None:
        py, ya = f.t / 2, "middle"
    else:
        yref = lookup(title, "yref", default="container")
        py = (1 - float(yv)) * height if yref == "container" else f.y(float(yv))
        ya = _auto(float(yv), lookup(title, "yanchor"), "bottom", "middle", "top")
        ya = {"bottom": "bottom", "top": "top"}.get(ya, "middle")
    x0, x1 = _anchored(px, w, xa)
    y0, y1 = _anchored(py, h, ya)
    return Box("title", x0, y0, x1, y1)


def _data_range(fig: Any, axis_name: str) -> tuple[float, float] | None:
    """The numeric range plotly would show on ``axis_name`` (e.g. "xaxis2")."""
    axis = axis_named(fig.layout, axis_name)
    rng = lookup(axis, "range")
    log = lookup(axis, "type") == "log"
    if rng is not None and None not in tuple(rng):
        lo, hi = float(rng[0]), float(rng[1])
        return (10**lo, 10**hi) if log else (lo, hi)
    letter = axis_name[0]
    short = letter + axis_name[5:]  # "xaxis2" -> "x2"
    values: list[float] = []
    for t in fig.data:
        if (lookup(t, letter + "axis", default=letter)) != short:
            continue
        data = lookup(t, letter)
        for v in () if data is None else data:
            try:
                values.append(float(v))
            except (TypeError, ValueError):
                return None  # categorical or dates: not modelled
    for shape in fig.layout.shapes:  # plotly's autorange takes in shapes on the axis
        if (shape[letter + "ref"] or letter) == short:
            values += [float(v) for v in (shape[letter + "0"], shape[letter + "1"]) if _num(v)]
    if not values:
        return None
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
    return lo - pad, hi + pad


def _num(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _ref_position(fig: Any, ref: str, value: Any, f: Frame, letter: str) -> float | None:
    to_px = f.x if letter == "x" else f.y
    if ref == "paper":
        return to_px(float(value))
    m = re.fullmatch(letter + r"(\d*)( domain)?", ref)
    if not m:
        return None
    axis_name = f"{letter}axis{m.group(1)}"
    axis = axis_named(fig.layout, axis_name)
    d0, d1 = lookup(axis, "domain", default=(0.0, 1.0))
    if m.group(2):
        return to_px(d0 + float(value) * (d1 - d0))
    rng = _data_range(fig, axis_name)
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    if rng is None or rng[1] == rng[0]:
        return None
    if lookup(axis, "type") == "log":
        import math

        if v <= 0 or rng[0] <= 0:
            return None
        frac = (math.log10(v) - math.log10(rng[0])) / (math.log10(rng[1]) - math.log10(rng[0]))
    else:
        frac = (v - rng[0]) / (rng[1] - rng[0])
    return to_px(d0 + frac * (d1 - d0))


def _annotation_boxes(fig: Any, f: Frame) -> Iterator[Box]:
    for i, a in enumerate(fig.layout.annotations):
        if a.visible is False or not a.text:
            continue
        size = font_size_of(a.font, fig.layout)
        w, h = text_size(a.text, size)
        w, h = w + 2 * float(a.borderpad or 1), h + 2 * float(a.borderpad or 1)
        # plotly.js places an annotation without a ref on the first axes, not the paper
        xref, yref = a.xref or "x", a.yref or "y"
        px = _ref_position(fig, xref, a.x if a.x is not None else 0.5, f, "x")
        py = _ref_position(fig, yref, a.y if a.y is not None else 0.5, f, "y")
        if px is None or py is None:
            continue
        px, py = px + float(a.xshift or 0), py - float(a.yshift or 0)
        arrow = a.showarrow is not False
        if arrow:
            px += float(a.ax if a.ax is not None else -10)
            py += float(a.ay if a.ay is not None else -30)
            xa, ya = "center", "middle"
        else:
            xf = float(a.x if a.x is not None else 0.5)
            yf = float(a.y if a.y is not None else 0.5)
            paper_x, paper_y = xref == "paper", yref == "paper"
            xa = _auto(xf if paper_x else 0.5, a.xanchor, "left", "center", "right")
            ya = _auto(yf if paper_y else 0.5, a.yanchor, "bottom", "middle", "top")
        x0, x1 = _anchored(px, w, xa)
        y0, y1 = _anchored(py, h, ya)
        label = a.name or plain(a.text).split("\n")[0][:40]
        yield Box(f"annotation {i} ({label!r})", x0, y0, x1, y1)


def _legend_box(fig: Any, width: float, height: float, f: Frame) -> Box | None:
    leg = legend_layout(fig, width, height)
    if leg is None:
        return None
    px = leg["x"] * width if leg["xref"] == "container" else f.x(leg["x"])
    py = (1 - leg["y"]) * height if leg["yref"] == "container" else f.y(leg["y"])
    x0, x1 = _anchored(px, leg["w"], leg["xanchor"])
    y0, y1 = _anchored(py, leg["h"], leg["yanchor"])
    return Box("legend", x0, y0, x1, y1)


def x_axis_labels(fig: Any, f: Frame) -> Iterator[tuple[Box | None, Box | None]]:
    """Per bottom x axis: the band its tick labels take (the axis's width) and its
    title's box (centred under the axis, ``standoff`` below the labels)."""
    layout = fig.layout
    for key, axis in axes_of(layout, "x"):
        if axis is not None and (axis.visible is False or axis.side == "top" or axis.overlaying):
            continue
        anchor = lookup(axis, "anchor", default="y")
        yname = "yaxis" + anchor[1:] if anchor and anchor.startswith("y") else "yaxis"
        yd = lookup(axis_named(layout, yname), "domain", default=(0.0, 1.0))
        x0, x1 = (f.x(float(d)) for d in lookup(axis, "domain", default=(0.0, 1.0)))
        top = f.y(float(yd[0]))
        depth, band = 0.0, None
        if lookup(axis, "showticklabels") is not False:
            tick = font_size_of(lookup(axis, "tickfont"), layout)
            texts = lookup(axis, "ticktext", default=()) or ()
            lines = max([plain(t).count("\n") + 1 for t in texts] + [1])
            depth = lines * tick * 1.4 + 3
            band = Box(f"{key} tick labels", x0, top, x1, top + depth)
        title, box = lookup(axis, "title", "text"), None
        if title:
            size = font_size_of(
                lookup(axis, "title", "font"), layout, default=1.17 * font_size_of(None, layout)
            )
            w, h = text_size(title, size)
            y0 = top + depth + float(lookup(axis, "title", "standoff", default=15))
            mid = (x0 + x1) / 2
            box = Box(f"{key} title", mid - w / 2, y0, mid + w / 2, y0 + h)
        yield band, box


def text_boxes(fig: Any, width: float = 900, height: float = 520) -> list[Box]:
    """Estimated boxes of the figure's texts: title, annotations, legend, x-axis titles."""
    fig = resolved(fig)
    f = frame(fig, width, height)
    boxes: list[Box] = []
    title = _title_box(fig, width, height, f)
    if title:
        boxes.append(title)
    boxes.extend(_annotation_boxes(fig, f))
    legend = _legend_box(fig, width, height, f)
    if legend:
        boxes.append(legend)
    boxes += [title for _, title in x_axis_labels(fig, f) if title]
    return boxes
