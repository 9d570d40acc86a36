"""Transient-server lifetimes from CM-DARE's shipped table, and the cost what-if built on them.

The table holds hour-binned CDF values (the fraction of servers revoked within N hours)
that the artifact wrote into its notebook; there are no per-instance lifetimes. The
smallest number of instances behind each CDF is the smallest count that makes every value
a whole number of servers; the true count is a multiple of it.
"""

from __future__ import annotations

from typing import Any

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.cmdare import data
from lab.experiments.cmdare.published import PAPER, PUBLISHED, REPO
from lab.experiments.cmdare.transient import HourlyLifetimes
from lab.experiments.verdicts import Status, Verdict

MAX_COUNT = 1000  # largest instance count tried when recovering one from a CDF
CDF_NOTE = "hour-binned CDF values from the CM-DARE artifact, not per-instance lifetimes"
LIFETIME_SOURCE = "data/matplotlib_scripts/Sigmetrics2020_redraws.ipynb, cells 13-15"


def lifetime_table() -> Any:
    """The shipped table: gpu, region, within_hours, cdf."""
    return data.lifetime_cdf()


def distribution(table: Any, gpu: str, region: str, max_hours: float = 24.0) -> HourlyLifetimes:
    """The lifetime distribution of one GPU type in one region."""
    rows = table[(table["gpu"] == gpu) & (table["region"] == region)]
    if rows.empty:
        pairs = sorted({f"{g}/{r}" for g, r in zip(table["gpu"], table["region"], strict=True)})
        raise ParameterError("gpu/region", f"{gpu}/{region}", ", ".join(pairs))
    return HourlyLifetimes.from_table(rows, max_hours)


def instances_behind(cdf: Any, tolerance: float = 1e-6) -> int | None:
    """The smallest number of servers for which every CDF value is a whole count (the
    table rounds to 10 digits), or None when no count up to MAX_COUNT fits."""
    values = [float(v) for v in cdf]
    for n in range(1, MAX_COUNT + 1):
        if all(abs(v * n - round(v * n)) < tolerance * n for v in values):
            return n
    return None


def counts_summing_to(minimums: list[int], total: int) -> tuple[int, ...] | None:
    """Counts, each a positive multiple of its minimum, that sum to ``total`` (the one with
    the fewest servers in the earliest groups), or None when there are none."""
    if not minimums:
        return () if total == 0 else None
    first, rest = minimums[0], minimums[1:]
    for k in range(1, total // first + 1):
        tail = counts_summing_to(rest, total - k * first)
        if tail is not None:
            return (k * first, *tail)
    return None


def summary(table: Any) -> Any:
    """One row per GPU type and region: the smallest instance count, the fractions revoked
    within 1 h / 12 h / 24 h, the fraction that reached 24 h, and the mean lifetime."""
    import pandas as pd

    rows = []
    for (gpu, region), g in table.groupby(["gpu", "region"], sort=True):
        at = g.set_index("within_hours")["cdf"]
        within24 = float(at[at.index <= 24].iloc[-1])
        rows.append(
            {
                "gpu": gpu,
                "region": region,
                "min_instances": instances_behind(g["cdf"]),
                "revoked_1h": float(at.get(1, float("nan"))),
                "revoked_12h": float(at.get(12, float("nan"))),
                "revoked_24h": within24,
                "reached_24h": 1.0 - within24,
                "mean_hours": distribution(table, gpu, region).mean_hours(),
            }
        )
    return pd.DataFrame(rows)


def cdf_figure(table: Any) -> Any:
    """The CDFs as hour steps, one panel per GPU type, one line per region (a colour per
    region in every panel, so the legend names each region once); the smallest instance
    count behind each CDF is in its hover text."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from lab.metrics.figures import COLORS, style

    if table is None or table.empty:
        raise NothingMeasured("no lifetime CDF to draw")
    gpus = sorted(table["gpu"].unique())
    regions = sorted(table["region"].unique())
    colors = {r: COLORS[i % len(COLORS)] for i, r in enumerate(regions)}
    fig = make_subplots(rows=1, cols=len(gpus), subplot_titles=gpus, shared_yaxes=True,
                        horizontal_spacing=0.04)  # fmt: skip
    shown: set[str] = set()
    for col, gpu in enumerate(gpus, 1):
        for region, g in table[table["gpu"] == gpu].groupby("region"):
            g = g.sort_values("within_hours")
            n = instances_behind(g["cdf"])
            fig.add_trace(
                go.Scatter(
                    x=[0, *g["within_hours"]],
                    y=[0, *g["cdf"]],
                    mode="lines",
                    line={"shape": "hv", "color": colors[region]},
                    name=str(region),
                    legendgroup=str(region),
                    showlegend=region not in shown,
                    hovertemplate=f"{gpu}, {region}: %{{y:.0%}} revoked within %{{x}} h "
                    f"(n = {n}: {n} instances or a multiple)<extra></extra>",
                ),
                row=1,
                col=col,
            )
            shown.add(region)
        fig.update_xaxes(title_text="hours since start", dtick=6, row=1, col=col)
    fig.update_yaxes(title_text="fraction revoked within", row=1, col=1, range=[0, 1.02],
                     tickformat=".0%")  # fmt: skip
    fig.update_layout(title="Transient GPU server lifetimes (CM-DARE, Google Cloud)")
    caption = (
        f"The artifact's table: {CDF_NOTE}; the last step to 100% (hour 25) counts the "
        "servers that reached the 24-hour limit. Hover a line for the smallest instance "
        "count n that makes each of its values a whole number of servers (the true count is "
        "a multiple)."
    )
    source = f"{REPO}, {LIFETIME_SOURCE}"
    return style(fig, caption=caption, sources=[source], legend="top")


def lifetimes_verdict(table: Any) -> Verdict:
    """Are the K80 CDFs consistent with the published 156 instances in 4 regions? Each
    region's count must be a multiple of the smallest one its CDF values allow."""
    pub = next(p for p in PUBLISHED if p.figure == "lifetimes" and p.setting == "K80")
    k80 = summary(table[table["gpu"] == "K80"])
    if k80.empty or k80["min_instances"].isna().any():
        raise NothingMeasured("the K80 CDFs give no instance count")
    mins = [int(n) for n in k80["min_instances"]]
    counts = counts_summing_to(mins, int(pub.value))
    ok = counts is not None and len(mins) == 4
    fits = (
        "e.g. " + ", ".join(f"{r} {n}" for r, n in zip(k80["region"], counts, strict=True))
        if counts
        else "no multiples of the smallest counts sum to it"
    )
    return Verdict(
        paper=PAPER,
        figure="lifetimes",
        claim="the K80 lifetime CDFs are over 156 instances in 4 regions",
        status=Status.REPRODUCED if ok else Status.NOT_REPRODUCED,
        lab_value=float(sum(counts)) if counts else float(sum(mins)),
        published_value=float(pub.value),
        published_source=pub.source,
        unit="instances",
        scale="paper",
        hardware="the artifact's table",
        why=(
            f"{len(mins)} K80 regions; the CDF values allow at least "
            f"{', '.join(f'{r} {n}' for r, n in zip(k80['region'], mins, strict=True))} "
            f"servers, consistent with {int(pub.value)} ({fits}); {CDF_NOTE}. "
            f"{k80['reached_24h'].min():.0%}-{k80['reached_24h'].max():.0%} of K80 servers "
            "reached the 24 h limit."
        ),
        runs=data.sources(data.LIFETIME_FILE),
        precision="exact: counts read from the artifact's table, no sampling",
    )
