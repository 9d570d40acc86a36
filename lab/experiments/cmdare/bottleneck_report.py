"""The PS-bottleneck figure and verdict: the lab's speeds beside CM-DARE's P100 ResNet-15
curves (as speedup over one worker), with the servers' measured utilisation."""

from __future__ import annotations

from typing import Any

from lab.errors import NothingMeasured
from lab.experiments.cmdare import data
from lab.experiments.cmdare.bottleneck import SCALES, SCALES_WITH
from lab.experiments.cmdare.published import PAPER, PUBLISHED
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


def figure(table: Any, scale: str = "smoke") -> Any:
    """Speed vs workers (lab, with the linear prediction), speedup beside CM-DARE's, and the
    servers' CPU and link utilisation."""
    from plotly.subplots import make_subplots

    s = SCALES[scale]
    fig = make_subplots(rows=1, cols=3, subplot_titles=(
        f"lab: global steps/s ({s['model']}, servers {s['ps_cpu']} core, {s['ps_link']})",
        "speedup over one worker: lab vs CM-DARE (P100, ResNet-15)",
        "lab: busiest server's use of its share"))  # fmt: skip
    for ps, g in table.groupby("ps"):
        name = f"{ps} PS (lab)"
        fig.add_scatter(x=g["workers"], y=g["speed"], mode="lines+markers", name=name,
                        row=1, col=1)  # fmt: skip
        fig.add_scatter(x=g["workers"], y=g["predicted"], mode="lines", line_dash="dot",
                        name=f"{ps} PS: one worker × workers", row=1, col=1)  # fmt: skip
        speedup = g["speed"] / g["predicted"].iloc[0]
        fig.add_scatter(x=g["workers"], y=speedup, mode="lines+markers", name=name,
                        showlegend=False, row=1, col=2)  # fmt: skip
        fig.add_scatter(x=g["workers"], y=g["ps_cpu_util"], mode="lines+markers",
                        name=f"{ps} PS: CPU", row=1, col=3)  # fmt: skip
        fig.add_scatter(x=g["workers"], y=g["ps_link_util"], mode="lines+markers",
                        line_dash="dash", name=f"{ps} PS: link", row=1, col=3)  # fmt: skip
    pub = published_curves()
    for (source, ps), g in pub.groupby(["source", "ps"]):
        line = source == "published"
        fig.add_scatter(
            x=g["workers"],
            y=g["speedup"],
            mode="lines" if line else "markers",
            line_dash="dash" if line else None,
            name=f"CM-DARE {ps} PS, {source}",
            row=1,
            col=2,
        )
    for col, title in ((1, "global steps/s"), (2, "speedup"), (3, "fraction of share / link")):
        fig.update_xaxes(title_text="workers", row=1, col=col)
        fig.update_yaxes(title_text=title, row=1, col=col)
    fig.update_layout(title=f"Where the parameter server becomes the bottleneck — lab on "
                      f"{HARDWARE}, {scale} scale", height=460)  # fmt: skip
    return fig


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
