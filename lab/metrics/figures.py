"""Plotly figures that show the paper beside the lab (DESIGN.md, contract 6).

Every builder takes the lab's summary table, the papers' published rows (``published=``;
drawn as hollow markers or hatched bars with short names, their sources in the hover text
and a footnote) and a ``caption`` that says at which scale, on which hardware and when the
lab's numbers were measured. Every builder, here and in the rooms, ends with ``style``
(``lab.metrics.figure_style``): one look that reads at 900×520. Figures are plain
``plotly.graph_objects.Figure`` objects: no kaleido, no widgets.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from lab.metrics.figure_style import (  # noqa: F401  (re-exported)
    COLORS,
    PUBLISHED_COLOR,
    add_caption,
    published_traces,
    series_name,
    style,
)
from lab.metrics.machine import gpu_names, hardware_description  # noqa: F401  (re-exported)
from lab.metrics.published import to_frame

log = logging.getLogger(__name__)


def caption(scale: str, hardware: str | None = None, date: str | dt.date | None = None) -> str:
    """The line under every figure: scale, hardware and date of the lab's measurement.

    Args:
        scale: "smoke" or "paper" (or any description of the run's size).
        hardware: what it ran on; default: ``hardware_description()`` of this machine.
        date: when; default: today.
    """
    hardware = hardware or hardware_description()
    if date is None:
        date = dt.date.today()
    if isinstance(date, (dt.date, dt.datetime)):
        date = date.isoformat()[:10]
    return f"Lab: measured at scale '{scale}' on {hardware}, {date}."


def runs_caption(run_dirs: Sequence[Any], scale: str, date: str | None = None) -> str:
    """The caption for a figure drawn from ``run_dirs``: where those runs ran, read from
    their manifests (cluster, its hosts, the launching machine's hardware), not where the
    notebook happens to run now.
    """
    from lab.metrics.layout import read_manifest

    where: dict[str, str] = {}
    dates = []
    for run_dir in run_dirs:
        m = read_manifest(run_dir)
        if not m:
            continue
        where.setdefault(_cluster_words(m), "")
        stamp = (m.get("started") or {}).get("iso")
        if stamp:
            dates.append(stamp[:10])
    if not where:
        return caption(scale, date=date)
    when = date or (max(dates) if dates else None)
    n = len(run_dirs)
    return caption(scale, hardware="; ".join(where), date=when) + f" {n} run(s)."


def _cluster_words(manifest: dict[str, Any]) -> str:
    cluster = manifest.get("cluster") or {}
    hosts = cluster.get("hosts") or []
    machine = (manifest.get("launched_on") or {}).get("hardware") or "an unrecorded machine"
    name = cluster.get("name") or "local"
    emulated = cluster.get("emulated") or {}
    if emulated:
        link = (emulated.get("link") or {}).get("bandwidth", "unshaped")
        return (
            f"cluster '{name}': {len(hosts)} emulated hosts of {emulated.get('cpu', '?')} "
            f"core and a {link} link each, on {machine}"
        )
    local = all(h.get("name") in ("localhost", "127.0.0.1") for h in hosts)
    if local:
        return f"cluster '{name}': {machine}"
    gpus = sum(int(h.get("gpus") or 0) for h in hosts)
    names = ", ".join(str(h.get("name")) for h in hosts[:4]) + (" …" if len(hosts) > 4 else "")
    return f"cluster '{name}': {len(hosts)} hosts ({names}), {gpus} GPUs in the profile"


def _go() -> Any:
    try:
        import plotly.graph_objects as go
    except ImportError as exc:  # pragma: no cover - plotly is in requirements.txt
        raise ImportError("lab.metrics.figures needs plotly: pip install plotly") from exc
    return go


def _groups(df: pd.DataFrame, color: str | None) -> list[tuple[str | None, pd.DataFrame]]:
    if color is None or color not in df.columns:
        return [(None, df)]
    return [(str(k), g) for k, g in df.groupby(color, sort=True, dropna=False)]


def _error(df: pd.DataFrame, col: str | None) -> dict[str, Any] | None:
    if col is None or col not in df.columns:
        return None
    values = pd.to_numeric(df[col], errors="coerce")
    if values.isna().all():
        return None
    return {"type": "data", "array": values.fillna(0).tolist(), "visible": True}


def published_name(row: Any, parts: Sequence[str] = ("system", "model")) -> str:
    """A published value's legend entry: ``"KungFu · ResNet50 (paper)"`` (its source goes
    into the hover text and the footnote, see ``style``)."""
    bits = [str(row[c]) for c in parts if c in row and pd.notna(row[c]) and row[c]]
    head = " · ".join(dict.fromkeys(bits)) or "paper"
    return series_name(head)[: 40 - len(" (paper)")].rstrip() + " (paper)"


def _color_of(system: Any, colors: dict[str, str]) -> str:
    """The colour of the lab's series for the same system, if one was drawn."""
    key = str(system or "").lower()
    for label, color in colors.items():
        if key and label.lower().startswith(key):
            return color
    return PUBLISHED_COLOR


# the legend key of the dashed ideal lines, drawn in each series' own colour
IDEAL_KEY = "ideal: 1 worker × N (dashed)"
IDEAL_KEY_PER_WORKER = "ideal: the 1-worker rate (dashed)"
HOLLOW = {"symbol": "circle-open", "size": 12, "line": {"width": 2}}
HATCHED = {
    "pattern": {"shape": "/"},
    "color": "rgba(0,0,0,0)",
    "line": {"width": 1.5, "color": PUBLISHED_COLOR},
}


def throughput_vs_workers(
    df: pd.DataFrame,
    x: str = "np",
    y: str = "throughput_total",
    error: str | None = "throughput_total_ci",
    color: str | None = None,
    single: float | None = None,
    ideal: bool = True,
    per_worker: bool = False,
    published: Any = None,
    caption: str | None = None,
    title: str = "Throughput vs workers",
    y_title: str | None = None,
) -> Any:
    """Measured throughput against worker count, with the ideal line and the paper's points.

    Published points at more than twice the lab's largest worker count go into a narrow
    panel of their own on the right: on one axis the lab's 2-4 workers would crowd into
    a corner beside the paper's 32.

    Args:
        df: one row per run or point (e.g. ``summarize_runs``): ``x``, ``y``, ``error``.
        color: a column that splits the lines (e.g. "system"); its values name them.
        single: single-worker throughput for the ideal line; default: per line, the
            measured value at its smallest ``x`` divided by that ``x``.
        ideal: draw ``single × N`` (a flat line when ``per_worker``).
        per_worker: ``y`` is per worker; published per-worker numbers are drawn as they
            are, otherwise they are multiplied by their worker count.
        published: ``Published`` rows or a DataFrame of them (``workers``, ``value``).
        caption: text under the plot (see ``caption``).
    """
    go = _go()
    data = df.dropna(subset=[x, y])
    pub = to_frame(published)
    pub = pub[pub["workers"].notna()] if len(pub) else pub
    top = float(data[x].max()) if len(data) else math.inf
    far = pub[pub["workers"].astype(float) > 2 * top] if len(pub) else pub
    near = pub.drop(far.index) if len(pub) else pub
    if len(far):
        from plotly.subplots import make_subplots

        counts = sorted({int(w) for w in far["workers"]})
        models = sorted({str(m) for m in far["model"].dropna()}) if "model" in far else []
        side = "paper, " + "/".join(map(str, counts)) + " workers"
        fig = make_subplots(
            rows=1,
            cols=2,
            column_widths=[0.72, 0.28],
            horizontal_spacing=0.1,
            subplot_titles=["lab", side + (f" · {models[0]}" if len(models) == 1 else "")],
        )
    else:
        fig = go.Figure()
    colors: dict[str, str] = {}
    drew_ideal = False
    for i, (name, group) in enumerate(_groups(data, color)):
        group = group.sort_values(x)
        label = series_name(name or "lab")
        colors[label] = COLORS[i % len(COLORS)]
        fig.add_trace(
            go.Scatter(
                x=group[x].tolist(),
                y=group[y].tolist(),
                error_y=_error(group, error),
                mode="lines+markers",
                name=label,
                legendgroup=label,
                line={"color": colors[label]},
            )
        )
        if ideal and len(group):
            xs = sorted(set(group[x].tolist()))
            base = single
            if base is None:
                first = group[group[x] == xs[0]][y].astype(float).mean()
                base = first / xs[0] if not per_worker else first
            ys = [base if per_worker else base * n for n in xs]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    line={"dash": "dash", "color": colors[label]},
                    name=series_name("ideal", name or "lab"),
                    legendgroup=label,
                    showlegend=False,  # one key for every ideal line (below)
                    hovertemplate="%{x} workers: %{y:.4g}<extra>1 worker × N</extra>",
                )
            )
            drew_ideal = True
    if drew_ideal:  # one key, not an "ideal · <series>" entry beside every series
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="lines",
                line={"dash": "dash", "color": "grey"},
                name=IDEAL_KEY_PER_WORKER if per_worker else IDEAL_KEY,
                hoverinfo="skip",
            )
        )
    for place, rows in ((1, near), (2, far)):
        for _, row in rows.iterrows():
            workers = row["workers"]
            scale = 1.0 if per_worker or not row.get("per_worker") else float(workers)
            err = row.get("error")
            trace = go.Scatter(
                x=[workers],
                y=[float(row["value"]) * scale],
                error_y={"type": "data", "array": [float(err) * scale]}
                if err is not None and pd.notna(err)
                else None,
                mode="markers",
                marker={**HOLLOW, "color": _color_of(row.get("system"), colors)},
                name=published_name(row),
                meta={"published": True, "source": row["source"]},
            )
            if place == 2:
                fig.add_trace(trace, row=1, col=2)
            else:
                fig.add_trace(trace)
    unit = "samples/s per worker" if per_worker else "samples/s (total)"
    fig.update_layout(title=title, template="plotly_white")
    ticks = sorted({*data[x].tolist(), *(near["workers"].tolist() if len(near) else [])})
    if len(far):
        fig.update_xaxes(title_text="workers", tickvals=ticks, row=1, col=1)
        fig.update_xaxes(title_text="workers", tickvals=counts, row=1, col=2)
        fig.update_yaxes(title_text=y_title or f"throughput, {unit}", row=1, col=1)
    else:
        fig.update_layout(xaxis_title="workers", yaxis_title=y_title or f"throughput, {unit}")
        fig.update_xaxes(tickvals=ticks)
    return style(fig, caption=caption)


def grouped_bars(
    df: pd.DataFrame,
    x: str = "model",
    y: str = "throughput_per_rank",
    error: str | None = "throughput_per_rank_ci",
    color: str | None = "system",
    published: Any = None,
    caption: str | None = None,
    title: str = "",
    y_title: str | None = None,
) -> Any:
    """Bars of ``y`` per ``x`` (e.g. model), one bar per ``color`` (e.g. system), and the
    paper's numbers as hatched bars beside them (matched on the published ``x``/``model``
    and ``color``/``system`` columns)."""
    go = _go()
    fig = go.Figure()
    colors: dict[str, str] = {}
    for i, (name, group) in enumerate(_groups(df.dropna(subset=[x, y]), color)):
        label = series_name(name or "lab")
        colors[label] = COLORS[i % len(COLORS)]
        fig.add_trace(
            go.Bar(
                x=group[x].astype(str).tolist(),
                y=group[y].tolist(),
                error_y=_error(group, error),
                name=label,
                marker={"color": colors[label]},
            )
        )
    pub = to_frame(published)
    if len(pub):
        px_col = x if x in pub.columns else "model"
        pc_col = color if color and color in pub.columns else "system"
        for name, group in _groups(pub, pc_col):
            first = group.iloc[0]
            errs = pd.to_numeric(group["error"], errors="coerce")
            fig.add_trace(
                go.Bar(
                    x=group[px_col].astype(str).tolist(),
                    y=group["value"].astype(float).tolist(),
                    error_y={"type": "data", "array": errs.fillna(0).tolist()}
                    if errs.notna().any()
                    else None,
                    name=published_name({"system": name}),
                    marker={**HATCHED, "line": {"width": 1.5, "color": _color_of(name, colors)}},
                    meta={"published": True, "source": first["source"]},
                )
            )
    fig.update_layout(
        title=title,
        barmode="group",
        xaxis_title=x,
        yaxis_title=y_title or y,
        template="plotly_white",
    )
    return style(fig, caption=caption)


def overhead_bars(
    df: pd.DataFrame,
    x: str = "setting",
    y: str = "overhead",
    error: str | None = "overhead_ci",
    published: Any = None,
    caption: str | None = None,
    title: str = "Overhead",
    percent: bool = True,
    color: str | None = None,
) -> Any:
    """Overhead (``1 − with/without``) per setting, measured beside published (hatched).

    ``published`` rows should hold overheads (``quantity="overhead"``, fractions), e.g.
    from ``published.derived_overheads``; they are matched on their ``setting``. ``color``
    names a column that splits the lab's bars (e.g. one per system and model), each
    series a bar in every setting's group.
    """
    go = _go()
    k = 100.0 if percent else 1.0
    fig = go.Figure()
    for i, (name, data) in enumerate(_groups(df.dropna(subset=[x, y]), color)):
        err = _error(data, error)
        if err:
            err["array"] = [v * k for v in err["array"]]
        fig.add_trace(
            go.Bar(
                x=data[x].astype(str).tolist(),
                y=(data[y].astype(float) * k).tolist(),
                error_y=err,
                name=series_name(name or "lab"),
                marker={"color": COLORS[i % len(COLORS)]},
            )
        )
    pub = to_frame(published)
    if len(pub):
        col = x if x in pub.columns else "setting"
        sources = list(dict.fromkeys(pub["source"].astype(str)))
        fig.add_trace(
            go.Bar(
                x=pub[col].astype(str).tolist(),
                y=(pub["value"].astype(float) * k).tolist(),
                name="paper",
                marker=HATCHED,
                meta={"published": True, "source": sources},
            )
        )
    fig.update_layout(
        title=title,
        barmode="group",
        xaxis_title=x,
        yaxis_title="overhead, %" if percent else "overhead (fraction)",
        template="plotly_white",
    )
    return style(fig, caption=caption)
