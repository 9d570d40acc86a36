"""Figs 11–13 drawn: the lab's EST overheads (Figs 11, 13) and its cost of determinism (Fig 12)
beside the published values. Only drawing: the numbers come from ``overhead_tables``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from lab.experiments.easyscale import published
from lab.experiments.easyscale.overhead_verdicts import StepCase, comparable_case
from lab.experiments.easyscale.runs import EST_LABEL
from lab.metrics.figures import HATCHED, style


def levels_figure(table: pd.DataFrame, caption: str | None = None) -> go.Figure:
    """Fig 12: time relative to non-deterministic training, lab bars and published ranges."""
    fig = go.Figure()
    for level, part in table.groupby("level", sort=False):
        fig.add_bar(x=part["device_type"], y=part["relative_time"], name=f"{level} (lab)")
    sources = []
    for system, color in (("EasyScale D1", "gray"), ("EasyScale D1+D2", "black")):
        lo = published.value("Fig 12", system=system, setting="min")
        hi = published.value("Fig 12", system=system, setting="max")
        fig.add_hrect(
            y0=lo.value,
            y1=hi.value,
            fillcolor=color,
            opacity=0.15,
            line_width=0,
            annotation_text=f"paper: {system.removeprefix('EasyScale ')} on V100/P100/T4",
            annotation_position="top left",
            annotation_font_size=11,
        )
        sources += [lo.source, hi.source]
    fig.update_layout(
        barmode="group",
        yaxis_title="time / non-deterministic (D0)",
        xaxis_title="device type",
        title=f"Fig 12: cost of determinism, {EST_LABEL}",
    )
    return style(fig, caption=caption, sources=sources)


def switching_figure(
    numbers: dict[str, Any], caption: str | None = None, cases: Sequence[StepCase] = ()
) -> go.Figure:
    """Figs 11 and 13: the lab's overhead and savings beside the published ones. With
    ``cases`` (``step_case``), Fig 11 is one bar per case, the paper's share beside the
    case of comparable step length only (``comparable_case``); else ``numbers``' share."""
    fig11 = published.value("Fig 11", system="EasyScale")
    judged = comparable_case(cases)
    if cases:
        labels = [f"switching, {c.name.split(' (')[0]}" for c in cases]
        lab = [c.share for c in cases]
        pub: list[float | None] = [fig11.value if c is judged else None for c in cases]
    else:
        labels, lab, pub = (
            ["share of a step switching"],
            [numbers.get("switch_share")],
            [fig11.value],
        )
    labels += ["ESTs 0..N-2 vs DDP step", "last EST (syncs)"]
    lab += [numbers.get("saving_other_ests"), numbers.get("saving_last_est")]
    pub += [
        published.value("Fig 13", setting="ESTs 0-6").value,
        published.value("Fig 13", setting="last EST (syncs)").value,
    ]
    sources = [fig11.source, published.value("Fig 13", setting="ESTs 0-6").source]
    fig = go.Figure()
    fig.add_bar(x=labels, y=lab, name="lab")
    fig.add_bar(
        x=labels,
        y=pub,
        name="paper (V100, 8 ESTs)",
        marker=HATCHED,
        meta={"published": True, "source": sources},
    )
    fig.update_layout(
        barmode="group",
        yaxis_tickformat=".1%",
        title=f"Figs 11/13: EST overheads, {EST_LABEL}",
    )
    return style(fig, caption=caption)
