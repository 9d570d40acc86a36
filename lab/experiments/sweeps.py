"""A notebook's sweep: every point run in order with a progress bar, the live run view and a
live summary figure, resuming what already finished."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lab.experiments.points import complete_point, run_point


def run_sweep(
    experiment: str,
    points: Sequence[Mapping[str, Any]],
    scale: str = "smoke",
    cluster: Any = "local",
    figure: Any = None,
    rerun: bool = False,
    view: Any = "auto",
    run: Any = None,
    trace: Any = None,
    label: Any = None,
) -> Any:
    """Run every point (resuming finished ones) with a progress bar, the live run view and
    a live summary figure; return the summary table (one row per point).

    Args:
        experiment: the run directories' group.
        points: parameter dicts (see ``run_point``); the scale's defaults are filled in.
        figure: builds a plotly figure from the summary so far; redrawn after each point.
        rerun: run finished points again.
        run: runs one completed point (default: ``run_point`` with these settings).
        trace: a ``lab.metrics.live.MetricTrace`` fed by every run (a live monitor line).
        label: names a point's lines in ``trace`` (default: its parameters).
    """
    from lab.metrics import LiveFigure, Sweep

    full = [complete_point(p, scale) for p in points]
    live = LiveFigure(figure) if figure is not None else None

    def one(point: dict[str, Any]) -> Any:
        if run is not None:
            return run(point)
        if trace is not None:
            trace.for_run(
                label(point) if label else ", ".join(f"{k}={v}" for k, v in point.items())
            )
        return run_point(point, experiment, scale=scale, cluster=cluster, view=view, observe=trace)

    sweep = Sweep(experiment, full, one, on_point_done=live)
    return sweep.run(rerun=rerun)
