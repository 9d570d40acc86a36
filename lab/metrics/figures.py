"""Plotly figures that show the paper beside the lab (DESIGN.md, contract 6).

Every builder takes the lab's summary table, the papers' published rows (``published=``;
drawn as hollow markers or hatched bars, named with their source) and a ``caption`` that
says at which scale, on which hardware and when the lab's numbers were measured. Figures
are plain ``plotly.graph_objects.Figure`` objects: no kaleido, no widgets.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

import pandas as pd

from lab.metrics.machine import gpu_names, hardware_description  # noqa: F401  (re-exported)
from lab.metrics.published import to_frame

log = logging.getLogger(__name__)

PUBLISHED_COLOR = "#555555"


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


def add_caption(fig: Any, text: str | None) -> Any:
    """Write ``text`` under the plot area (and make room for it); returns ``fig``."""
    if not text:
        return fig
    fig.add_annotation(
        text=text,
        xref="paper",
        yref="paper",
        x=0,
        y=-0.22,
        xanchor="left",
        yanchor="top",
        showarrow=False,
        align="left",
        font={"size": 11, "color": "#444"},
        name="caption",
    )
    fig.update_layout(margin={"b": 110})
    return fig


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


def _published_label(row: pd.Series, extra: Sequence[str] = ()) -> str:
    bits = [str(row[c]) for c in ("system", *extra) if c in row and pd.notna(row[c]) and row[c]]
    head = " ".join(dict.fromkeys(bits)) or "paper"
    return f"{head} (published: {row['source']})"


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

    Args:
        df: one row per run or point (e.g. ``summarize_runs``): ``x``, ``y``, ``error``.
        color: a column that splits the lines (e.g. "system").
        single: single-worker throughput for the ideal line; default: per line, the
            measured value at its smallest ``x`` divided by that ``x``.
        ideal: draw ``single × N`` (a flat line when ``per_worker``).
        per_worker: ``y`` is per worker; published per-worker numbers are drawn as they
            are, otherwise they are multiplied by their worker count.
        published: ``Published`` rows or a DataFrame of them (``workers``, ``value``).
        caption: text under the plot (see ``caption``).
    """
    go = _go()
    fig = go.Figure()
    for name, group in _groups(df.dropna(subset=[x, y]), color):
        group = group.sort_values(x)
        label = name or "lab"
        fig.add_trace(
            go.Scatter(
                x=group[x].tolist(),
                y=group[y].tolist(),
                error_y=_error(group, error),
                mode="lines+markers",
                name=f"{label} (measured)",
                legendgroup=label,
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
                    line={"dash": "dash"},
                    name=f"{label} ideal (1 worker × N)",
                    legendgroup=label,
                )
            )
    pub = to_frame(published)
    for _, row in pub.iterrows():
        workers = row.get("workers")
        if workers is None or pd.isna(workers):
            continue
        scale = 1.0 if per_worker or not row.get("per_worker") else float(workers)
        err = row.get("error")
        fig.add_trace(
            go.Scatter(
                x=[workers],
                y=[float(row["value"]) * scale],
                error_y={"type": "data", "array": [float(err) * scale]}
                if err is not None and pd.notna(err)
                else None,
                mode="markers",
                marker={"symbol": "circle-open", "size": 12, "line": {"width": 2}},
                name=_published_label(row, ("setting",)),
                meta={"published": True, "source": row["source"]},
            )
        )
    unit = "samples/s per worker" if per_worker else "samples/s (total)"
    fig.update_layout(
        title=title,
        xaxis_title="workers",
        yaxis_title=y_title or f"throughput, {unit}",
        template="plotly_white",
    )
    return add_caption(fig, caption)


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
    for name, group in _groups(df.dropna(subset=[x, y]), color):
        fig.add_trace(
            go.Bar(
                x=group[x].astype(str).tolist(),
                y=group[y].tolist(),
                error_y=_error(group, error),
                name=f"{name or 'lab'} (measured)",
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
                    name=f"{name or 'paper'} (published: {first['source']})",
                    marker={
                        "pattern": {"shape": "/"},
                        "color": "rgba(0,0,0,0)",
                        "line": {"width": 1.5},
                    },
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
    return add_caption(fig, caption)


def overhead_bars(
    df: pd.DataFrame,
    x: str = "setting",
    y: str = "overhead",
    error: str | None = "overhead_ci",
    published: Any = None,
    caption: str | None = None,
    title: str = "Overhead",
    percent: bool = True,
) -> Any:
    """Overhead (``1 − with/without``) per setting, measured beside published (hatched).

    ``published`` rows should hold overheads (``quantity="overhead"``, fractions), e.g.
    from ``published.derived_overheads``; they are matched on their ``setting``.
    """
    go = _go()
    k = 100.0 if percent else 1.0
    fig = go.Figure()
    data = df.dropna(subset=[x, y])
    err = _error(data, error)
    if err:
        err["array"] = [v * k for v in err["array"]]
    fig.add_trace(
        go.Bar(
            x=data[x].astype(str).tolist(),
            y=(data[y].astype(float) * k).tolist(),
            error_y=err,
            name="lab (measured)",
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
                name="paper (published: " + "; ".join(sources) + ")",
                marker={
                    "pattern": {"shape": "/"},
                    "color": "rgba(0,0,0,0)",
                    "line": {"width": 1.5},
                },
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
    return add_caption(fig, caption)


def published_traces(fig: Any) -> list[Any]:
    """The traces of ``fig`` that show published numbers."""
    return [t for t in fig.data if isinstance(t.meta, dict) and t.meta.get("published")]
