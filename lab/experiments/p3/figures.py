"""P3's figures: throughput vs bandwidth per arm, P3's gain vs bandwidth with the
published peaks marked, and one iteration's timeline per schedule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lab.experiments.p3.analysis import rate_of
from lab.experiments.p3.published import PUBLISHED
from lab.experiments.p3.sweep import LABELS
from lab.metrics.figure_style import series_name, style

COLORS = {"baseline": "#7f7f7f", "slicing": "#1f77b4", "p3": "#d62728", "mxnet-baseline": "#2f2f2f",
          "mxnet-slicing": "#17becf", "p3-mxnet-fork": "#ff7f0e"}  # fmt: skip
# legend names of the MXNet arms (their full labels, in ``LABELS``, go into the hover text)
LEGEND = {"mxnet-baseline": "baseline (MXNet KVStore)", "mxnet-slicing": "slicing (MXNet)",
          "p3-mxnet-fork": "P3 (its MXNet fork)"}  # fmt: skip
KIND_COLORS = {"backward": "#9467bd", "push": "#1f77b4", "server": "#bcbd22",
               "return": "#2ca02c", "next forward wait": "#d62728"}  # fmt: skip


def throughput_vs_bandwidth(summary: pd.DataFrame, caption: str = "") -> go.Figure:
    """Total images/s vs link bandwidth (log axis), one line per arm and model, 95% CIs."""
    fig = go.Figure()
    ok = summary[summary["state"] == "succeeded"] if "state" in summary else summary
    if not ok.empty:
        ok = ok.assign(mbit=[rate_of(b) / 1e6 for b in ok["bandwidth"]]).sort_values("mbit")
        for (model, arm), g in ok.groupby(["model", "schedule"], sort=False):
            fig.add_trace(go.Scatter(
                x=g["mbit"], y=g["throughput_total"], mode="lines+markers",
                name=series_name(LEGEND.get(arm) or LABELS.get(arm, arm), model),
                hovertemplate="%{x} Mbit/s: %{y:.4g} img/s<extra>" + LABELS.get(arm, arm)
                + "</extra>",
                line={"color": COLORS.get(arm)},
                error_y={"type": "data", "array": g["throughput_total_ci"], "visible": True},
            ))  # fmt: skip
    fig.update_layout(
        title="Training throughput vs link bandwidth",
        xaxis={"title": "link bandwidth (Mbit/s)", "type": "log"},
        yaxis={"title": "images/s, all workers", "rangemode": "tozero"},
    )
    return style(fig, caption=caption)


def gain_vs_bandwidth(table: pd.DataFrame, caption: str = "") -> go.Figure:
    """P3's throughput gain over the baseline vs bandwidth, with the published peak gains
    (abstract: ResNet-50, Sockeye, VGG-19) as dashed lines."""
    fig = go.Figure()
    for model, g in table.groupby("model"):
        fig.add_trace(go.Scatter(
            x=g["bits_per_s"] / 1e6, y=g["gain"] * 100, mode="lines+markers",
            name=series_name("gain", model),
            line={"color": COLORS["p3"]},
            error_y={"type": "data", "array": g["gain_ci"] * 100, "visible": True},
        ))  # fmt: skip
    sources = []
    for p in PUBLISHED:
        if p.quantity == "peak_gain":
            fig.add_hline(
                y=p.value * 100, line_dash="dash", line_color="#444",
                annotation_text=f"paper's peak, {p.model}: +{p.value:.0%}",
                annotation_position="top left", annotation_font_size=11,
            )  # fmt: skip
            sources.append(p.source)
    fig.add_hline(y=0, line_color="#999")
    fig.update_layout(
        title="P3's throughput gain over the baseline vs link bandwidth (lab, torch + TCP)",
        xaxis={"title": "link bandwidth (Mbit/s)", "type": "log"},
        yaxis={"title": "throughput gain (%)"},
        showlegend=True,
    )
    return style(fig, caption=caption, sources=sources)


ROW_PX = 15  # a timeline row: an 11-12 px label and a little air


def iteration_timeline(bars: Mapping[str, pd.DataFrame], caption: str = "") -> go.Figure:
    """One iteration per schedule as a Gantt chart: rows are (layer, what), bars start and
    end in seconds from the iteration's start (``lab.experiments.p3.analysis.timeline``)."""
    names = list(bars)
    fig = make_subplots(rows=len(names), cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        subplot_titles=[LABELS.get(n, n) for n in names])  # fmt: skip
    shown: set[str] = set()
    rows = max((bars[n]["row"].nunique() for n in names), default=1)
    for i, name in enumerate(names, 1):
        df = bars[name]
        order = sorted(df["row"].unique(), key=lambda r: (-int(r.split()[0][1:]), r))
        for kind, g in df.groupby("kind"):
            fig.add_trace(go.Bar(
                x=g["end"] - g["start"], base=g["start"], y=g["row"], orientation="h",
                name=kind, legendgroup=kind, showlegend=kind not in shown,
                marker={"color": KIND_COLORS.get(kind), "line": {"width": 0.5, "color": "#333"}},
                hovertemplate="%{y}: %{base:.3f}–%{x:.3f} s<extra>" + kind + "</extra>",
            ), row=i, col=1)  # fmt: skip
            shown.add(kind)
        # every row named: plotly drops category labels that would overlap, and a bar
        # whose row has no name cannot be read (hence the height below)
        fig.update_yaxes(categoryorder="array", categoryarray=order, tickmode="array",
                         tickvals=order, row=i, col=1)  # fmt: skip
    fig.update_layout(
        barmode="overlay",
        title="One iteration: backward, each slice's push / server / return, next forward wait",
    )
    fig.update_xaxes(title_text="seconds from the iteration's start", row=len(names), col=1)
    per_plot = max(240, ROW_PX * rows + 60)  # rows of a subplot, each tall enough for its label
    return style(fig, caption=caption, height=per_plot * len(names) + 120)


def figure_caption(scale: str, cluster: Any, extra: str = "") -> str:
    from lab.metrics.figures import caption

    return caption(f"{scale}, {cluster}" + (f", {extra}" if extra else ""))
