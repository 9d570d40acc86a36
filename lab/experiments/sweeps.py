"""A notebook's sweep: every point run in order with a progress bar, one live view (the running
point's run view and a table of the points done) and a live summary figure, resuming what
already finished; and the measurement protocol's rounds, resumed and shown the same way.

The controls (lab.experiments.controls) run their point through the same ``run_point``
into the same experiment, so a point tried there is one the sweep finds done.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from lab.errors import ParameterError, RunStopped
from lab.experiments.batch import in_batch, require_measured
from lab.experiments.outcome import STOPPED, state_of
from lab.experiments.points import cluster_name, complete_point, recorded_as, run_point
from lab.metrics.sweep import _canon


def varying(points: Sequence[Mapping[str, Any]]) -> list[str]:
    """The keys whose values differ between points (what names a point in a table)."""
    keys = list(dict.fromkeys(k for p in points for k in p))
    vary = [k for k in keys if len({_canon(p.get(k)) for p in points}) > 1]
    return vary or keys[:3]


def point_label(point: Mapping[str, Any], keys: Sequence[str]) -> str:
    return ", ".join(f"{k}={point.get(k)}" for k in keys)


def _raise_if_stopped(result: Any, experiment: str, label: str, done: int) -> None:
    if state_of(result) != STOPPED:
        return
    reason = getattr(result, "reason", "") or "stopped"
    raise RunStopped(
        f"{experiment}: the run of [{label}] was {reason}, so the sweep ended there; the "
        f"{done} point(s) done before it are kept, and running this cell again goes on from "
        "them."
    )


def _complete(points: Sequence[Mapping[str, Any]], scale: str, where: str) -> list[dict]:
    return [
        complete_point({"cluster": where, **p}, scale)
        if "system" in p
        else {"cluster": where, **p, "scale": scale}  # a paper room's own kind of point
        for p in points
    ]


def run_sweep(
    experiment: str,
    points: Sequence[Mapping[str, Any]],
    scale: str = "smoke",
    cluster: Any = "local",
    figure: Any = None,
    rerun: bool = False,
    view: Any = "auto",
    run: Callable[[dict[str, Any]], Any] | None = None,
    trace: Any = None,
    label: Any = None,
    strict: bool | None = None,
    retries: int = 1,
    *,
    complete: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
    key: Sequence[str] | None = None,
    observe: Callable[[dict[str, Any], Any], None] | None = None,
    succeeded_only: bool = False,
    results_root: Any = None,
    progress: bool = True,
) -> Any:
    """Run every point (resuming finished ones) with a progress bar, one live view and a
    live summary figure; return the summary table (one row per point).

    Every sweep of the lab goes through here: the benchmark rooms with ``run_point``, a
    paper room with its own runner (``run``), its own point check (``complete``) and
    identity (``key``), so that resuming, retrying, the one sweep view, a stop from the
    view and the nothing-measured check are the same everywhere.

    Args:
        experiment: the run directories' group.
        points: parameter dicts. A point with a ``system`` is a benchmark point (see
            ``run_point``; the scale's defaults are filled in); others are a paper room's
            own points and go to ``run`` as they are, with ``cluster`` and ``scale``.
        figure: builds a plotly figure from the summary so far; redrawn after each point.
        rerun: run finished points again.
        view: ``"auto"``: in a notebook, one box holding the running point's run view and
            a table of the points done (lab.cluster.view_sweep); else as for ``launch``.
        run: runs one completed point (default: ``run_point`` with these settings); a
            room's runner builds its own cluster and fault plan per point.
        trace: a ``lab.metrics.live.MetricTrace`` fed by every run (a live monitor line).
        label: names a point's lines in ``trace`` (default: its parameters).
        retries: run a failed point again this often before counting it failed (each
            attempt keeps its run directory; the summary's ``attempts`` says how many).
        strict: fail when any point fails or the figure cannot be drawn (default: in a
            batch run, see ``lab.experiments.batch``). A sweep with no succeeded point
            always raises ``NothingMeasured``.
        complete: a room's point check: point -> the full point that is run and recorded
            (default: ``complete_point`` for a benchmark point, else the point with
            ``cluster`` and ``scale``). Every point passes it before the first run.
        key: the parameters that identify a point when resuming (default: all of them).
        observe: called with each point and what its run returned (a failed run too).
        succeeded_only: return only the succeeded points' rows.
        results_root: the results root (default: ``store.results_root()``).
        progress: show the progress bar.

    Raises:
        RunStopped: a run was stopped from its view; the points done before it are kept.
        ParameterError: a point is bad (from ``complete``, or from ``run`` before it
            started anything); no point after it runs.
        NothingMeasured: no point succeeded (in a batch run: one failed).

    A point's identity includes the cluster it ran on, so resuming on another cluster
    runs the points again instead of captioning old runs with the new cluster's name.
    """
    from lab.cluster.view_sweep import SweepView
    from lab.metrics import LiveFigure, Sweep

    strict = in_batch() if strict is None else strict
    if complete is None:
        full = _complete(points, scale, cluster_name(cluster))
    else:
        full = [complete(p) for p in points]
    keys = varying(points)
    live = LiveFigure(figure) if figure is not None else None
    shown = SweepView(experiment, len(full), widgets=None if view == "auto" else False)

    def one(point: dict[str, Any]) -> Any:
        name = point_label(point, keys)
        shown.running(name)
        if run is not None:
            result = run(point)
        else:
            if trace is not None:
                trace.for_run(label(point) if label else name)
            result = run_point(
                point, experiment, scale=scale, cluster=cluster, view=view, observe=trace
            )
        if observe is not None:
            observe(point, result)
        _raise_if_stopped(result, experiment, name, len(shown.rows))
        return result

    def point_done(summary: Any) -> None:
        shown.done(_rows(summary, keys))
        if live is not None:
            live(summary)

    sweep = Sweep(
        experiment,
        full,
        one,
        key=None if key is None else list(key),
        results_root=results_root,
        on_point_done=point_done,
        progress=progress,
        strict=strict,
        retries=retries,
        raises=(ParameterError,),
    )
    with shown:
        summary = sweep.run(rerun=rerun)
    summary = require_measured(summary, experiment, strict=strict)
    if succeeded_only:
        return summary[summary["state"] == "succeeded"].reset_index(drop=True)
    return summary


def _rows(summary: Any, keys: Sequence[str]) -> list[dict[str, Any]]:
    """The sweep view's table: per point its parameters that vary, state, throughput, run."""
    rows = []
    for r in summary.to_dict("records"):
        rows.append(
            {
                "point": point_label(r, keys),
                "state": r.get("state"),
                "samples/s": r.get("throughput_total"),
                "how": "done before" if r.get("sweep_status") == "skipped" else "ran now",
                "run": str(r.get("run_dir") or "").rsplit("/", 1)[-1],
            }
        )
    return rows


def run_rounds(
    experiment: str,
    points: Sequence[Mapping[str, Any]],
    compared: Sequence[Any] | None = None,
    target: Any = None,
    keys: Sequence[Any] | None = None,
    scale: str = "smoke",
    cluster: Any = "local",
    run: Callable[[Mapping[str, Any]], Any] | None = None,
    resume: bool | None = None,
    measure: str = "total",
) -> Any:
    """The measurement protocol's rounds over ``points`` (``run_protocol``), resumed from
    the runs already made and shown in one live view.

    Args:
        experiment: the run directories' group.
        points, compared, target, keys, measure: as for ``run_protocol``.
        scale, cluster: as for ``run_point``.
        run: runs one point (default: ``run_point`` into ``experiment``).
        resume: hand back the runs an earlier pass over the same points made, call by call
            (lab.experiments.resume), so that running the cell again launches nothing
            that is done, and a point tried from the controls stands in for a run of it;
            default: interactively yes; in a batch run (``make run``) no, so that every
            batch run is a measurement of its own.

    Raises:
        RunStopped: a run was stopped from its view.
    """
    from lab.cluster.view_sweep import SweepView
    from lab.experiments.protocol_runner import run_protocol, steady_throughput
    from lab.experiments.resume import Replay, pass_id

    where = cluster_name(cluster)
    plain = [{k: v for k, v in p.items() if k != "phase"} for p in points]
    full = _complete(plain, scale, where)
    label_keys = varying(plain)
    replay = Replay(
        experiment,
        pass_id(full, compared or []),
        enabled=(not in_batch()) if resume is None else resume,
    )
    shown = SweepView(experiment, len(full))
    done: dict[str, dict[str, Any]] = {}

    def note(name: str, run_dir: Any, state: str, how: str) -> None:
        value = steady_throughput(run_dir)[measure] if state == "succeeded" else None
        row = done.setdefault(name, {"point": name, "runs": 0, "done before": 0})
        row["runs"] += 1
        row["done before"] += how != "ran now"
        row.update({"state": state, "samples/s (last)": value, "how (last)": how})
        row["run (last)"] = str(run_dir).rsplit("/", 1)[-1]
        shown.done(list(done.values()))

    def one(point: Mapping[str, Any]) -> Any:
        whole = _complete([point], scale, where)[0]
        name = point_label(whole, label_keys)
        handed = replay.take(whole)
        if handed is not None:
            note(name, handed.run_dir, handed.state, f"done before ({handed.made_by})")
            return handed
        shown.running(name)
        tags = replay.tags()
        replay.launched()
        with recorded_as(tags):
            result = run(point) if run is not None else run_point(point, experiment, scale, cluster)
        _raise_if_stopped(result, experiment, name, sum(r["runs"] for r in done.values()))
        note(name, getattr(result, "run_dir", ""), state_of(result), "ran now")
        return result

    with shown:
        return run_protocol(
            points, one, compared, target, keys=keys, measure=measure, clock=replay.clock
        )


def room_sweep(
    experiment: str, launch: Callable[..., Any], key: Sequence[str]
) -> Callable[..., Any]:
    """A paper room's ``run_sweep(points, view="auto", rerun=False)`` (CM-DARE's): each
    point run by ``launch(point, view=view)`` and identified by ``key``, through
    ``run_succeeded``; so a room names its experiment, runner and key, not a sweep."""

    def sweep(points: Iterable[Mapping[str, Any]], view: Any = "auto", rerun: bool = False) -> Any:
        """Every point, resumably, through the lab's one ``run_sweep``; the summary of the
        succeeded runs, one row per point. Raises NothingMeasured when nothing succeeded
        (in a batch run: when one failed)."""
        run = functools.partial(launch, view=view)
        return run_succeeded(experiment, list(points), run, key, rerun, view)

    return sweep


def run_succeeded(
    experiment: str,
    points: Sequence[Mapping[str, Any]],
    launch: Callable[[dict[str, Any]], Any],
    key: Sequence[str],
    rerun: bool = False,
    view: Any = "auto",
) -> Any:
    """``run_sweep`` for a paper room whose points are complete as its ``points`` built
    them: ``launch`` (point -> RunResult) runs each, ``key`` identifies it; the succeeded
    points' rows.

    Raises:
        ParameterError: ``launch`` found a point bad; no point after it runs.
        NothingMeasured: no point succeeded, or (in a batch run) one failed.
    """
    return run_sweep(
        experiment,
        points,
        rerun=rerun,
        view=view,
        run=launch,
        complete=dict,
        key=key,
        succeeded_only=True,
    )
