"""Figures of the speed-model notebook: MAPE per model, the paper's beside the lab's, and
the row split beside whole CNNs held out."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd


def mape_bars(
    table: pd.DataFrame,
    series: Mapping[str, str],
    title: str,
    caption: str = "",
    x: str = "setting",
) -> object:
    """Grouped bars of MAPE (%) per ``x`` (the model), one bar per ``series`` (legend ->
    column); columns the table lacks are skipped. The ``published`` column, where there
    is one, is drawn hatched with each row's ``source`` on hover and in the footnote."""
    import plotly.graph_objects as go

    from lab.metrics.figures import HATCHED, style

    names = table[x].astype(str).tolist()
    sources = table["source"].astype(str).tolist() if "source" in table else []
    fig = go.Figure()
    for name, column in series.items():
        if column not in table:
            continue
        if column == "published":  # the paper's numbers
            fig.add_bar(x=names, y=table[column], name=name, marker=HATCHED,
                        customdata=sources or None, meta={"published": True, "source": sources},
                        hovertemplate=f"{name}: %{{y:.1f}}%"
                        + ("<br>%{customdata}" if sources else "")
                        + "<extra></extra>")  # fmt: skip
        else:
            fig.add_bar(x=names, y=table[column], name=name,
                        hovertemplate=f"{name}: %{{y:.1f}}%<extra></extra>")  # fmt: skip
    fig.update_layout(title=title, barmode="group", yaxis_title="MAPE (%)", xaxis_title="model")
    return style(fig, caption=caption or None)
