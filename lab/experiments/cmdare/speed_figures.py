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
    column); columns the table lacks are skipped."""
    import plotly.graph_objects as go

    from lab.metrics.figures import add_caption

    fig = go.Figure()
    for name, column in series.items():
        if column in table:
            fig.add_bar(x=table[x], y=table[column], name=name)
    fig.update_layout(title=title, barmode="group", yaxis_title="MAPE (%)", xaxis_title="model")
    return add_caption(fig, caption) if caption else fig
