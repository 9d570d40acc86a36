"""KungFu Fig 4 drawn: four panels over training time, a line per run and seed. Noise
scale, global batch, throughput and evaluation loss, with notes on diverged runs and the
noise-scale estimates left off the panel. Only drawing: the curves come from
``adaptive_tables``.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from lab.experiments.kungfu.adaptive_tables import NOISE_WINDOW, PANELS, loss_rises, noise_medians


def legend_name(run: str) -> str:
    """ "adaptive (start 32)" → "adaptive · from 32"; "fixed (start 32)" → "fixed · 32"."""
    policy, _, rest = run.partition(" (start ")
    batch = rest.rstrip(")")
    return f"{policy} · from {batch}" if policy == "adaptive" else f"{policy} · {batch}"


def robust_log_range(values: Any, tail: float = 0.02) -> tuple[list[float] | None, int, int]:
    """A log axis range that shows the estimates between the ``tail`` and 1 − ``tail``
    quantiles of the positive ones: one wild estimate (|G|² estimated near zero on a noisy
    step gives ±10^7) otherwise flattens every other value. Returns the range (log10,
    padded by 0.1 decade; None when nothing is positive), how many estimates fall outside
    it and how many there are (finite ones)."""
    import numpy as np

    v = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)
    v = v[np.isfinite(v)]
    pos = v[v > 0]
    if not len(pos):
        return None, len(v), len(v)
    lo, hi = np.log10(np.quantile(pos, [tail, 1.0 - tail]))
    lo, hi = float(lo) - 0.1, float(hi) + 0.1
    logs = np.log10(np.where(v > 0, v, 1.0))
    shown = (v > 0) & (logs >= lo) & (logs <= hi)
    return [lo, hi], int(len(v) - shown.sum()), len(v)


def figure(table: pd.DataFrame, caption: str | None = None, workers: Any = None) -> Any:
    """Four panels over training time, one line per run and seed (a colour per run):
    noise scale (the running median of ``NOISE_WINDOW`` steps' estimates, on a log axis
    over the middle 96% of them), global batch, throughput and evaluation loss with the
    target. A run whose loss rose in every seed is named as diverged in the legend and
    the footnote."""
    import plotly.colors
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from lab.metrics.figures import style

    where = {"noise_scale": (1, 1), "batch_size": (1, 2), "img_per_s": (2, 1), "eval_loss": (2, 2)}
    fig = make_subplots(
        rows=2,
        cols=2,
        shared_xaxes=True,
        horizontal_spacing=0.1,
        vertical_spacing=0.14,
        subplot_titles=[PANELS[k] for k in where],
    )
    rises = loss_rises(table).set_index("run") if len(table) else pd.DataFrame()
    drawn = table.assign(noise_scale=noise_medians(table)) if len(table) else table
    colours = plotly.colors.qualitative.Plotly
    for k, (name, runs) in enumerate(drawn.groupby("run", sort=True)):
        down = bool(len(rises)) and bool(rises.loc[name, "diverged"])
        label = legend_name(str(name)) + (" (diverged)" if down else "")
        for j, (_, c) in enumerate(runs.groupby("seed", sort=True, dropna=False)):
            for i, (col, (row, column)) in enumerate(where.items()):
                fig.add_trace(
                    go.Scatter(
                        x=c["elapsed"].tolist(),
                        y=c[col].tolist(),
                        name=label,
                        legendgroup=str(name),
                        showlegend=i == 0 and j == 0,
                        mode="lines",
                        line={"color": colours[k % len(colours)], "width": 1.5},
                        hovertemplate=f"{label}, seed {c['seed'].iloc[0]}: "
                        "%{y:.4g} at %{x:.3g} s<extra></extra>",
                    ),
                    row=row,
                    col=column,
                )
    noise_range, off, count = robust_log_range(drawn["noise_scale"] if len(drawn) else [])
    fig.update_yaxes(
        type="log", range=noise_range, tickvals=_one_two_five(noise_range), tickformat="~s",
        row=1, col=1,
    )  # fmt: skip
    batches = pd.to_numeric(table.get("batch_size", pd.Series(dtype=float)), errors="coerce")
    fig.update_yaxes(type="log", tickvals=_powers_of_two(batches), row=1, col=2)
    fig.update_yaxes(rangemode="tozero", row=2, col=1)
    target = pd.to_numeric(table.get("target_loss", pd.Series(dtype=float)), errors="coerce")
    if target.notna().any():
        fig.add_hline(
            y=float(target.dropna().iloc[0]),
            line_dash="dash",
            line_color="#888",
            annotation_text="target",
            annotation_position="top right",
            row=2,
            col=2,
        )
    for column in (1, 2):
        fig.update_xaxes(title_text="training seconds (a line per seed)", row=2, col=column)
    for text in PANELS.values():
        fig.update_annotations(font_size=14, selector={"text": text})
    title = "Adaptive vs fixed batch size (lab, Horovod"
    fig.update_layout(template="plotly_white")
    fig.update_layout(title=title + (f", {workers} workers)" if workers is not None else ")"))
    notes = [_divergence_note(rises, table), _noise_note(off, count), caption or ""]
    return style(fig, caption=" ".join(n for n in notes if n), legend="top")


def run_traces(run_dir: Any) -> list[Any]:
    """One launch as ``figure`` draws it, its lines on the same four panels (what
    ``Controls.mark(draw=...)`` adds for a run tried in the controls)."""
    from lab.experiments.kungfu.adaptive_tables import curves

    table = curves(pd.DataFrame([{"run_dir": str(run_dir), "state": "succeeded"}]))
    return list(figure(table).data)


def _one_two_five(log_range: list[float] | None) -> list[float] | None:
    """Ticks 1, 2, 5 × 10^k inside a log axis's range (log10), for full labels ("2k")
    where plotly writes a bare "2"."""
    if log_range is None:
        return None
    lo, hi = log_range
    ticks = [m * 10.0**k for k in range(math.floor(lo), math.ceil(hi) + 1) for m in (1, 2, 5)]
    return [t for t in ticks if lo <= math.log10(t) <= hi]


def _powers_of_two(values: Any) -> list[int] | None:
    """The powers of two from the smallest to the largest of ``values`` (the batch axis's
    ticks: the policy doubles the batch), None when there are none."""
    values = [int(v) for v in values if v == v]
    if not values or min(values) < 1:
        return None
    lo, hi = math.floor(math.log2(min(values))), math.ceil(math.log2(max(values)))
    return [2**k for k in range(lo, hi + 1)]


def _divergence_note(rises: pd.DataFrame, table: pd.DataFrame) -> str:
    gone = rises[rises["diverged"]] if len(rises) else rises
    if not len(gone):
        return ""
    lr = pd.to_numeric(table.get("lr", pd.Series(dtype=float)), errors="coerce").dropna()
    at = f" at learning rate {lr.iloc[0]:g}" if len(lr) else ""
    words = "; ".join(
        f"{legend_name(str(run))}: evaluation loss {r['first']:.3g} → {r['last']:.3g}"
        for run, r in gone.iterrows()
    )
    return f"Diverged{at} (the loss rose in every seed): {words}."


def _noise_note(off: int, count: int) -> str:
    if not off:
        return ""
    return (
        f"Noise scale: each line is the running median of {NOISE_WINDOW} steps' estimates, "
        f"its axis the middle 96% of them; {off} of {count} (≤ 0 or beyond, where |G|² is "
        "estimated near zero) are off the panel."
    )
