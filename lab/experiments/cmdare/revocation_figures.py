"""The revocation notebook's figures, each beside CM-DARE's data. The rate around a worker's
revocation, the chief's overhead against the steps since its checkpoint, and checkpoint time
against size. Only drawing: the numbers come from ``revocation_tables``.
"""

from __future__ import annotations

from typing import Any

from lab.experiments.cmdare import data
from lab.experiments.cmdare import revocation_cost as rev
from lab.experiments.cmdare.published import REPO
from lab.experiments.cmdare.revocation import revoked_at, steps_of
from lab.experiments.cmdare.revocation_tables import (
    HARDWARE,
    chief_source,
    published_chief,
    revoked_ranks,
)


def worker_figure(summary: Any, effects: Any) -> Any:
    """The throughput timeline around the revocation, one line per replacement mode with
    its 95%-of-before level dotted, and below it the replaced worker's share of the steps
    (what the verdict compares before and after: rev.recovered_share)."""
    from plotly.colors import qualitative
    from plotly.subplots import make_subplots

    from lab.metrics.figures import style

    colors = qualitative.Plotly
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.64, 0.36],
                        vertical_spacing=0.08)  # fmt: skip
    for i, (_, e) in enumerate(effects.iterrows()):
        steps, revoked = steps_of(e["run_dir"]), revoked_at(e["run_dir"])["revoked"]
        line = rev.timeline(steps, revoked)
        color = colors[i % len(colors)]
        fig.add_scatter(x=line["t"], y=line["rate"], mode="lines", name=f"{e['mode']} · lab",
                        line_color=color, legendgroup=e["mode"], row=1, col=1)  # fmt: skip
        level = rev.RECOVERED * e["rate_before"]
        fig.add_scatter(x=[line["t"].min(), line["t"].max()], y=[level, level], mode="lines",
                        line={"dash": "dot", "width": 1, "color": color},
                        name=f"{rev.RECOVERED:.0%} of the rate before", legendgroup="level",
                        showlegend=i == 0, row=1, col=1,
                        hovertemplate=f"{e['mode']}: {rev.RECOVERED:.0%} of the rate before, "
                        "%{y:.1f} steps/s<extra></extra>")  # fmt: skip
        share = rev.share_timeline(steps, revoked, revoked_ranks(e["run_dir"]))
        fig.add_scatter(x=share["t"], y=share["share"], mode="lines", line_color=color,
                        name=f"{e['mode']}: replaced worker's share", legendgroup=e["mode"],
                        showlegend=False, row=2, col=1)  # fmt: skip
    for row in (1, 2):
        fig.add_vline(x=0, line_dash="dash", line_color="#888", row=row, col=1)
    fig.add_annotation(x=0, y=1, xref="x", yref="y domain", text="worker revoked",
                       showarrow=False, xanchor="left", yanchor="top", xshift=4)  # fmt: skip
    fig.update_yaxes(title_text="global steps/s (last 2 s)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="share of steps", tickformat=".0%", row=2, col=1)
    fig.update_xaxes(title_text="seconds since the revocation", row=2, col=1)
    fig.update_layout(template="plotly_white")
    fig.update_layout(title="A worker revoked during asynchronous PS training (2 workers, 1 PS)")
    caption = (
        f"Lab: TF parameter servers on {HARDWARE.split(' (')[0]}; a line per replacement mode "
        "(cold: the revoked process starts again from scratch; warm: a pre-started standby "
        "takes over). Below: the replaced worker's share of the steps, which the verdict "
        "compares before and after."
    )
    return style(fig, caption=caption, legend="top")


def chief_figure(lab: Any) -> Any:
    """Overhead vs steps since the checkpoint: the lab's runs (left), CM-DARE's (right)."""
    import numpy as np
    from plotly.subplots import make_subplots

    from lab.metrics.figures import style

    line, runs = published_chief()
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        "lab: TF PS, chief restarted cold", "CM-DARE: ResNet-32 on K80s"))  # fmt: skip
    fig.update_annotations(font_size=14)
    fig.add_scatter(x=lab["since"], y=lab["overhead_s"], mode="markers",
                    name="lab: overhead", row=1, col=1)  # fmt: skip
    if "redo_s" in lab:
        fig.add_scatter(x=lab["since"], y=lab["redo_s"], mode="markers", row=1, col=1,
                        name="lab: redone steps")  # fmt: skip
    if lab["since"].nunique() >= 2:
        y = lab["redo_s"] if "redo_s" in lab else lab["overhead_s"]
        a, b, r2 = rev.linear_fit(lab["since"], y)
        xs = np.array([lab["since"].min(), lab["since"].max()])
        fig.add_scatter(x=xs, y=a + b * xs, mode="lines", name=f"lab: fit (R² {r2:.2f})",
                        row=1, col=1)  # fmt: skip
    cited = chief_source()
    runs_src = f"{REPO}, data/processed_data/{data.CHIEF_DIR} (minus the mean of the base runs)"
    fig.add_scatter(x=line["since"], y=line["overhead_s"], mode="lines+markers",
                    name="CM-DARE: published", meta={"published": True, "source": cited},
                    row=1, col=2)  # fmt: skip
    fig.add_scatter(x=runs["since_checkpoint"], y=runs["overhead_s"], mode="markers",
                    name="CM-DARE: runs", meta={"published": True, "source": runs_src},
                    row=1, col=2)  # fmt: skip
    for col in (1, 2):
        fig.update_xaxes(title_text="steps since the last checkpoint", row=1, col=col)
        fig.update_yaxes(title_text="overhead (s)", rangemode="tozero", row=1, col=col)
    fig.update_layout(template="plotly_white")
    fig.update_layout(title="Revoking the chief: overhead vs steps since the last checkpoint")
    caption = (
        f"Lab: {HARDWARE}; the chief restarted cold from its checkpoint; redone steps = "
        "overhead − the restart (the line is fitted to them). CM-DARE: the chief rejoining; "
        "the artifact's runs are their time minus the mean of the runs without a revocation."
    )
    return style(fig, caption=caption, legend="top")


def checkpoint_figure(lab: Any, fits: Any) -> Any:
    """Duration vs size, the lab's checkpoints and CM-DARE's, each with its fitted line."""
    import numpy as np
    import plotly.graph_objects as go

    from lab.metrics.figures import style

    theirs = data.checkpoint_table()
    fig = go.Figure()
    fig.add_scatter(x=lab["size_mb"], y=lab["seconds"], mode="markers", text=lab["model"],
                    name="lab · TF PS chief")  # fmt: skip
    cited = f"{REPO}, data/processed_data/{data.CHECKPOINT_FILE}"
    fig.add_scatter(x=theirs["Checkpoint Size (MB)"], y=theirs["Duration"], mode="markers",
                    text=theirs["Model"], name="CM-DARE · 20 CNNs",
                    meta={"published": True, "source": cited})  # fmt: skip
    for _, f in fits.iterrows():
        xs = np.geomspace(f["size_mb_min"], f["size_mb_max"], 30)
        name = f"{f['data']} LR: {f['s_per_mb']:.3g} s/MB, MAPE {f['mape']:.0f}%"
        fig.add_scatter(x=xs, y=f["intercept_s"] + f["s_per_mb"] * xs, mode="lines", name=name)
    fig.update_layout(xaxis={"title": "checkpoint size (MB)", "type": "log", "dtick": 1},
                      yaxis={"title": "duration (s)", "type": "log", "dtick": 1},
                      template="plotly_white")  # fmt: skip
    fig.update_layout(title="Checkpoint duration vs size")
    caption = (
        f"Lab: the TF PS chief's checkpoints on {HARDWARE}. CM-DARE: 20 CNNs checkpointed to "
        "Google Cloud Storage. LR: a least-squares line fitted to each (MAPE in-sample)."
    )
    return style(fig, caption=caption, legend="top")
