"""Figures of the trace experiment: Fig 14 (JCT and makespan per policy, the paper's
beside the lab's), Fig 15 (devices allocated over time) and the lab's sweeps (scheduling
interval, cluster mix). Builders take DataFrames and return plotly figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from lab.experiments.easyscale.published_trace import POLICIES, published_frame
from lab.metrics.figures import COLORS, HATCHED, style

QUANTITIES = (("mean_jct", "average JCT (s)"), ("makespan", "makespan (s)"))
LAB_NAME = "lab (simulated)"
LAB_WORDS = "lab: simulated with the lab's measured step times"


def _subplots(titles: tuple[str, ...]) -> Any:
    from plotly.subplots import make_subplots

    return make_subplots(rows=1, cols=len(titles), subplot_titles=titles)


def _order(policies: pd.Series) -> list[str]:
    known = [p for p in POLICIES if p in set(policies)]
    return known + sorted(set(policies) - set(known))


def jct_makespan_bars(
    summary: pd.DataFrame,
    published: pd.DataFrame | None = None,
    caption: str | None = None,
    log_y: bool = True,
) -> Any:
    """Fig 14: average JCT and makespan per policy, lab bars beside published bars.

    Args:
        summary: one row per policy with ``policy``, ``mean_jct``, ``makespan``.
        published: published rows (default: ``published_frame()``), ``system`` naming the
            policy and ``quantity`` mean_jct or makespan.
        caption: what the lab's numbers were measured with (scale, hardware).
        log_y: a log axis (the policies differ by an order of magnitude).
    """
    import plotly.graph_objects as go

    pub = published_frame() if published is None else published
    fig = _subplots(tuple(title for _, title in QUANTITIES))
    order = _order(summary["policy"])
    for col, (quantity, _) in enumerate(QUANTITIES, start=1):
        lab = summary.set_index("policy").reindex(order)[quantity]
        fig.add_trace(
            go.Bar(
                x=order,
                y=lab.values,
                name=LAB_NAME,
                marker_color="#1f77b4",
                textposition="outside",
                showlegend=col == 1,
                text=[f"{v:.0f}" for v in lab.values],
            ),
            row=1,
            col=col,
        )
        rows = pub[pub["quantity"] == quantity].set_index("system").reindex(order)
        fig.add_trace(
            go.Bar(
                x=order,
                y=rows["value"].values,
                name="paper (Fig 14)",
                marker=HATCHED,
                showlegend=col == 1,
                text=[f"{v:.0f}" if pd.notna(v) else "" for v in rows["value"].values],
                textposition="outside",
                meta={"published": True, "source": list(dict.fromkeys(rows["source"].dropna()))},
            ),
            row=1,
            col=col,
        )
        fig.update_yaxes(type="log" if log_y else "linear", title_text="seconds", row=1, col=col)
    fig.update_layout(barmode="group", title="Trace experiment: JCT and makespan per policy")
    return style(fig, caption=_with_words(caption))


def allocation_over_time(
    allocations: Mapping[str, pd.DataFrame] | pd.DataFrame, caption: str | None = None
) -> Any:
    """Fig 15: devices allocated over time, one step line per policy.

    Args:
        allocations: ``{policy: SimResult.allocation}`` or one frame with a ``policy``
            column (time, device_type, devices).
    """
    import plotly.graph_objects as go

    df = _with_policy(allocations)
    total = df.groupby(["policy", "time"], as_index=False)["devices"].sum()
    fig = go.Figure()
    for policy in _order(total["policy"]):
        one = total[total["policy"] == policy].sort_values("time")
        fig.add_trace(
            go.Scatter(
                x=one["time"],
                y=one["devices"],
                name=policy,
                mode="lines",
                line_shape="hv",
            )
        )
    fig.update_layout(
        title="Devices allocated over time",
        xaxis_title="time (s)",
        yaxis_title="devices allocated",
    )
    return style(fig, caption=_with_words(caption))


def allocation_by_type(
    allocations: Mapping[str, pd.DataFrame] | pd.DataFrame, caption: str | None = None
) -> Any:
    """Devices allocated over time per device type, one panel per policy (which types
    each policy leaves idle)."""
    import plotly.graph_objects as go

    df = _with_policy(allocations)
    policies = _order(df["policy"])
    fig = _subplots(tuple(policies))
    colors = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")
    types = sorted(df["device_type"].unique())
    for col, policy in enumerate(policies, start=1):
        for i, t in enumerate(types):
            one = df[(df["policy"] == policy) & (df["device_type"] == t)].sort_values("time")
            fig.add_trace(
                go.Scatter(
                    x=one["time"],
                    y=one["devices"],
                    name=t,
                    stackgroup=f"p{col}",
                    line_shape="hv",
                    line_color=colors[i % len(colors)],
                    showlegend=col == 1,
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="time (s)")
    fig.update_yaxes(title_text="devices allocated", row=1, col=1)
    fig.update_layout(title="Devices allocated over time, by device type")
    return style(fig, caption=_with_words(caption))


def _with_policy(allocations: Mapping[str, pd.DataFrame] | pd.DataFrame) -> pd.DataFrame:
    if isinstance(allocations, pd.DataFrame):
        return allocations
    return pd.concat([a.assign(policy=p) for p, a in allocations.items()], ignore_index=True)


def sweep_figure(sweep: pd.DataFrame, x: str = "interval_s", caption: str | None = None) -> Any:
    """JCT and makespan per policy against a swept axis: lines for a numeric axis (the
    scheduling interval), grouped bars for a categorical one (the cluster mix)."""
    import plotly.graph_objects as go

    fig = _subplots(tuple(title for _, title in QUANTITIES))
    numeric = pd.api.types.is_numeric_dtype(sweep[x])
    words = x.replace("_s", " (s)").replace("_", " ")
    policies = _order(sweep["policy"])
    for col, (quantity, _) in enumerate(QUANTITIES, start=1):
        for i, policy in enumerate(policies):
            one = (
                sweep[sweep["policy"] == policy].sort_values(x)
                if numeric
                else sweep[sweep["policy"] == policy]
            )
            kwargs = {
                "x": one[x],
                "y": one[quantity],
                "name": policy,
                "showlegend": col == 1,
                "legendgroup": policy,
                "marker": {"color": COLORS[i % len(COLORS)]},
            }
            trace = go.Scatter(mode="lines+markers", **kwargs) if numeric else go.Bar(**kwargs)
            fig.add_trace(trace, row=1, col=col)
        fig.update_xaxes(title_text=words, row=1, col=col)
        fig.update_yaxes(title_text="seconds", type="log", row=1, col=col)
    fig.update_layout(barmode="group", title=f"JCT and makespan against {words}, {LAB_NAME}")
    return style(fig, caption=_with_words(caption))


def _with_words(caption: str | None) -> str:
    """The caption, after what the lab's numbers are (they are simulated)."""
    return f"{LAB_WORDS}. {caption}" if caption else f"{LAB_WORDS}."
