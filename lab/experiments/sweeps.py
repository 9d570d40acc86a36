"""A notebook's sweep: every point run in order with a progress bar, the live run view and a
live summary figure, resuming what already finished."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lab.experiments.batch import in_batch, require_measured
from lab.experiments.points import cluster_name, complete_point, run_point


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
    strict: bool | None = None,
    retries: int = 1,
) -> Any:
    """Run every point (resuming finished ones) with a progress bar, the live run view and
    a live summary figure; return the summary table (one row per point).

    Args:
        experiment: the run directories' group.
        points: parameter dicts. A point with a ``system`` is a benchmark point (see
            ``run_point``; the scale's defaults are filled in); others are a paper room's
            own points and go to ``run`` as they are, with ``cluster`` and ``scale``.
        figure: builds a plotly figure from the summary so far; redrawn after each point.
        rerun: run finished points again.
        run: runs one completed point (default: ``run_point`` with these settings).
        trace: a ``lab.metrics.live.MetricTrace`` fed by every run (a live monitor line).
        label: names a point's lines in ``trace`` (default: its parameters).
        retries: run a failed point again this often before counting it failed (each
            attempt keeps its run directory; the summary's ``attempts`` says how many).
        strict: fail when any point fails or the figure cannot be drawn (default: in a
            batch run, see ``lab.experiments.batch``). A sweep with no succeeded point
            always raises ``NothingMeasured``.

    A point's identity includes the cluster it ran on, so resuming on another cluster
    runs the points again instead of captioning old runs with the new cluster's name.
    """
    from lab.metrics import LiveFigure, Sweep

    strict = in_batch() if strict is None else strict
    where = cluster_name(cluster)
    full = [
        complete_point({"cluster": where, **p}, scale)
        if "system" in p
        else {"cluster": where, **p, "scale": scale}  # a paper room's own kind of point
        for p in points
    ]
    live = LiveFigure(figure) if figure is not None else None

    def one(point: dict[str, Any]) -> Any:
        if run is not None:
            return run(point)
        if trace is not None:
            trace.for_run(
                label(point) if label else ", ".join(f"{k}={v}" for k, v in point.items())
            )
        return run_point(point, experiment, scale=scale, cluster=cluster, view=view, observe=trace)

    sweep = Sweep(experiment, full, one, on_point_done=live, strict=strict, retries=retries)
    return require_measured(sweep.run(rerun=rerun), experiment, strict=strict)


def run_succeeded(
    experiment: str,
    points: Sequence[Mapping[str, Any]],
    launch: Any,
    key: Sequence[str],
    rerun: bool = False,
) -> Any:
    """A paper room's own sweep without the live figure: every point through ``launch``
    (point -> RunResult), resumably, a failed one tried once more; the summary of the
    succeeded runs, one row per point.

    Raises:
        NothingMeasured: no point succeeded, or (in a batch run) one failed.
    """
    from lab.metrics import Sweep

    sweep = Sweep(experiment, list(points), launch, key=list(key), retries=1)
    summary = require_measured(sweep.run(rerun=rerun), experiment)
    return summary[summary["state"] == "succeeded"].reset_index(drop=True)
