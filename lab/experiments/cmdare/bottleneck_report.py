"""The PS-bottleneck figure and verdict: the lab's speeds beside CM-DARE's P100 ResNet-15
curves (as speedup over one worker), with the servers' measured utilisation."""

from __future__ import annotations

from typing import Any

from lab.errors import NothingMeasured
from lab.experiments.cmdare import data
from lab.experiments.cmdare.bottleneck import SCALES_WITH, settings
from lab.experiments.cmdare.published import PAPER, PUBLISHED, REPO
from lab.experiments.verdicts import Status, Verdict

HARDWARE = "emulated hosts on this machine's CPU (TF parameter servers)"
GAIN = 1.15  # a second server must lift the speed at the most workers by this much


def published_curves() -> Any:
    """CM-DARE's P100 ResNet-15 speeds (the published rows) and the shipped runs' medians,
    with the speedup over one worker of each."""
    import pandas as pd

    rows = [{"ps": int(p.setting.split()[0]), "workers": int(p.workers), "speed": p.value,
             "source": "published"} for p in PUBLISHED if p.figure == "PS bottleneck"]  # fmt: skip
    runs = data.cluster_speed("res15").rename(columns={"median": "speed"})
    runs["source"] = "artifact runs (median)"
    df = pd.concat([pd.DataFrame(rows), runs[["ps", "workers", "speed", "source"]]])
    one = df[df["workers"] == 1].set_index(["source", "ps"])["speed"]
    df["speedup"] = [r["speed"] / one[(r["source"], r["ps"])] for _, r in df.iterrows()]
    return df.reset_index(drop=True)


PS_COLORS = {1: "#1f77b4", 2: "#d62728", 3: "#2ca02c", 4: "#9467bd"}  # a colour per PS count


def figure(table: Any, scale: str = "smoke") -> Any:
    """Speed vs workers (lab, with the linear prediction), speedup beside CM-DARE's, and the
    servers' CPU and link utilisation; a colour per server count in every panel."""
    from plotly.subplots import make_subplots

    from lab.metrics.figures import style

    s = settings(scale)  # as run (a rehearsal's cuts included)
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.09, subplot_titles=(
        "lab: global steps/s", "speedup: lab vs CM-DARE", "lab: busiest server's use"))  # fmt: skip
    fig.update_annotations(font_size=14)
    rank = {"lab": 1, "cmdare published": 3, "cmdare artifact runs (median)": 5, "linear": 6}
    for ps, g in table.groupby("ps"):
        color = PS_COLORS.get(int(ps), "#7f7f7f")
        lab = {"line_color": color, "legendgroup": f"{ps} lab", "legendrank": 100 + int(ps)}
        fig.add_scatter(x=g["workers"], y=g["speed"], mode="lines+markers",
                        name=f"{ps} PS · lab", row=1, col=1, **lab)  # fmt: skip
        fig.add_scatter(x=g["workers"], y=g["predicted"], mode="lines", line_dash="dot",
                        name="one worker × N", showlegend=bool(ps == table["ps"].min()),
                        legendgroup="linear", legendrank=100 * rank["linear"], line_color=color,
                        row=1, col=1)  # fmt: skip
        speedup = g["speed"] / g["predicted"].iloc[0]
        fig.add_scatter(x=g["workers"], y=speedup, mode="lines+markers", showlegend=False,
                        name=f"{ps} PS · lab", row=1, col=2, **lab)  # fmt: skip
        fig.add_scatter(x=g["workers"], y=g["ps_cpu_util"], mode="lines+markers",
                        name=f"{ps} PS · CPU", showlegend=False, row=1, col=3, **lab)  # fmt: skip
        fig.add_scatter(x=g["workers"], y=g["ps_link_util"], mode="lines+markers",
                        line_dash="dash", name=f"{ps} PS · link", showlegend=False,
                        row=1, col=3, **lab)  # fmt: skip
    pub = published_curves()
    cited = {
        "published": next(p.source for p in PUBLISHED if p.figure == "PS bottleneck"),
        "artifact runs (median)": f"{REPO}, data/processed_data/cluster_speed (the runs' medians)",
    }
    for (source, ps), g in pub.groupby(["source", "ps"]):
        line = source == "published"
        color = PS_COLORS.get(int(ps), "#7f7f7f")
        fig.add_scatter(
            x=g["workers"],
            y=g["speedup"],
            mode="lines" if line else "markers",
            line={"dash": "dash", "color": color, "width": 1.5} if line else None,
            marker=None if line else {"symbol": "circle-open", "size": 8, "color": color},
            name=f"{ps} PS · CM-DARE" if line else "CM-DARE runs (median)",
            legendgroup=f"cmdare {source} {ps}",
            legendrank=100 * rank[f"cmdare {source}"] + int(ps),
            showlegend=bool(line or ps == pub["ps"].min()),
            hovertemplate=f"CM-DARE, P100, ResNet-15, {ps} PS ({source}): "
            f"%{{y:.2f}}× at %{{x}} workers<br>{cited[source]}<extra></extra>",
            meta={"published": True, "source": cited[source]},
            row=1,
            col=2,
        )
    titles = ((1, "global steps/s"), (2, "× one worker"), (3, "solid: CPU, dashed: link"))
    for col, title in titles:
        fig.update_xaxes(title_text="workers", dtick=1 if col != 2 else None, row=1, col=col)
        fig.update_yaxes(title_text=title, rangemode="tozero", row=1, col=col)
    fig.update_yaxes(tickformat=".0%", row=1, col=3)
    fig.update_layout(template="plotly_white", margin={"l": 60})
    fig.update_layout(title="Where one parameter server becomes the bottleneck")
    caption = (
        f"Lab: {s['model']}, batch {s['batch_size']}, servers of {s['ps_cpu']} core and a "
        f"{s['ps_link']} link each; {HARDWARE}, {scale} scale. CM-DARE: P100 GPUs, ResNet-15 "
        "(dashed: the published curves; circles: the artifact's runs, median). Right: the "
        "busiest server's CPU (of its share) and link use."
    )
    return style(fig, caption=caption, legend="top")


def verdict(table: Any, scale: str = "smoke") -> Verdict:
    """With the most workers, one server falls short of the linear prediction because a
    server resource is saturated, and a second server lifts the speed."""
    if table is None or table.empty or set(table["ps"]) < {1, 2}:
        raise NothingMeasured("the verdict needs runs with one and with two servers")
    n = int(table.groupby("ps")["workers"].max().min())
    one = table[(table["ps"] == 1) & (table["workers"] == n)].iloc[0]
    two = table[(table["ps"] == 2) & (table["workers"] == n)].iloc[0]
    gain = float(two["speed"] / one["speed"])
    ps_bound = one["bottleneck"].startswith("PS")  # the most used resource is a server's
    held = one["ratio"] < SCALES_WITH and ps_bound and gain >= GAIN
    pub = {(int(p.setting.split()[0]), p.workers): p.value
           for p in PUBLISHED if p.figure == "PS bottleneck"}  # fmt: skip
    pub_gain = pub[(2, n)] / pub[(1, n)] if (1, n) in pub else None
    return Verdict(
        paper=PAPER,
        figure="PS bottleneck",
        claim="one parameter server becomes the bottleneck as workers are added; a second lifts it",
        status=Status.REPRODUCED if held else Status.NOT_REPRODUCED,
        lab_value=gain,
        published_value=pub_gain,
        published_source=next(p.source for p in PUBLISHED if p.figure == "PS bottleneck"),
        unit=f"x speed with 2 PS over 1 PS at {n} workers",
        scale=scale,
        hardware=HARDWARE,
        why=(
            f"At {n} workers, 1 PS: {one['speed']:.2f} steps/s, {one['ratio']:.0%} of the "
            f"linear prediction {one['predicted']:.2f}; bottleneck: {one['bottleneck']} "
            f"(server CPU {one['ps_cpu_util']:.0%} of its share, throttled in "
            f"{one['ps_throttled']:.0%} of periods; link {one['ps_link_util']:.0%}, "
            f"{one['ps_mbit']:.1f} Mbit/s). 2 PS: {two['speed']:.2f} steps/s "
            f"({two['ratio']:.0%}; {two['bottleneck']})."
        ),
        runs=tuple(table["run_dir"]),
    )
