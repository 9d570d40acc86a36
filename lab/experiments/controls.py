"""Widgets bound to a notebook's parameters, with a Run button that runs one point live.

Papermill never clicks, so a batch run skips straight past them to the sweep. A click runs
the point in a worker thread, so the kernel stays free to deliver the run view's Stop
button; every click gets a fresh output of its own for its run view (an output cleared
and written again from a thread lost the second view in JupyterLab), and earlier runs
stay listed in a small table below it.

The point is the sweep's: given the sweep's points, the controls hold every setting the
widgets do not show at the sweep's value (steps, warm-up ...), run through the same
``run`` into the same experiment, and so record a point the sweep finds done and does not
run again. A room whose points are built from its parameters rather than being them (a
setting named by its monitor, arms joined into one launch) gives ``build``, which makes
the sweep's point from the widgets' values. The line under the title says, as the values
change, what the point holds besides them. ``mark`` draws the runs tried here on a figure:
as stars at a point's place, or, for a figure that draws whole runs (a timeline, curves),
as the room draws a run, dotted. Values are checked as typed (lab.experiments.
control_fields): a value that is not allowed is refused with a message beside its field
and Run stays disabled, never rounded or clamped.
"""

from __future__ import annotations

import html
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lab.errors import ParameterError
from lab.experiments.control_fields import make_field
from lab.experiments.points import recorded_as
from lab.experiments.resume import CONTROLS_KEY
from lab.metrics.sweep import _canon

log = logging.getLogger(__name__)

MARK_NAME = "tried in the controls"
REFUSED_POINT = "distlab-refused-point"  # the status line's class for values build refused
TRIED = "tried · "  # before the legend name of a run drawn by ``mark(draw=...)``
Place = Callable[[Mapping[str, Any], Path], float | None]


def sweep_base(
    sweep: Sequence[Mapping[str, Any]], shown: Sequence[str]
) -> tuple[dict[str, Any], list[str]]:
    """The settings a sweep's points share that the widgets do not show, and the names of
    those that differ between its points (taken from its first point)."""
    base: dict[str, Any] = {}
    differ = []
    for key in dict.fromkeys(k for p in sweep for k in p):
        if key in shown or key == "phase":
            continue
        values = {_canon(p.get(key)) for p in sweep}
        base[key] = sweep[0].get(key)
        if len(values) > 1:
            differ.append(key)
    return base, differ


class Controls:
    """A row of checked widgets for some parameters and a Run button (module docstring).

    Args:
        defaults: parameter name -> starting value (usually the parameters cell's values).
        run: called as ``run(point, out=...)`` when Run is pressed: ``point`` is the
            sweep's settings with the widgets' values over them (or what ``build``
            makes of the values); ``out`` is a fresh ``ipywidgets.Output`` for the live
            view (``run_point(..., out=out)``).
        choices: parameter name -> allowed values, shown as a dropdown.
        title: a short line above the widgets.
        sweep: the sweep's points: what the widgets do not show is taken from them, and
            the page says so. Without it the point is the widgets' values alone.
        bounds: parameter name -> (low, high) for whole numbers (default 1 to 1,000,000).
        parse: parameter name -> its own check of the typed text (returns the value,
            raises ValueError or ParameterError to refuse it).
        build: the widgets' values -> the point the sweep would run for them, for a room
            whose points are built from its parameters; a ParameterError it raises refuses
            the values (beside the field it names, where it names one).
    """

    def __init__(
        self,
        defaults: Mapping[str, Any],
        run: Callable[..., Any],
        choices: Mapping[str, Sequence[Any]] | None = None,
        title: str = "Try one point",
        sweep: Sequence[Mapping[str, Any]] | None = None,
        bounds: Mapping[str, tuple[int | None, int | None]] | None = None,
        parse: Mapping[str, Callable[[str], Any]] | None = None,
        build: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        import ipywidgets as w

        choices, bounds, parse = choices or {}, bounds or {}, parse or {}
        self._run = run
        self._build = build
        self._sweep = sweep
        self.fields = {
            k: make_field(k, v, choices.get(k), bounds.get(k), parse.get(k))
            for k, v in defaults.items()
        }
        self.base, self._differ = sweep_base(sweep or [], list(self.fields))
        self.runs: list[tuple[dict[str, Any], Any]] = []
        self.button = w.Button(description="Run", button_style="primary", icon="play")
        self.status = w.HTML(value="")
        self.current = w.VBox([])  # this click's output; a new one for every click
        self.history = w.HTML(value="")
        self.explained = w.HTML(value="")
        self.button.on_click(self._clicked)
        for f in self.fields.values():
            f.widget.observe(self._checked, names="value")
        self.widget = w.VBox(
            [
                w.HTML(f"<b>{html.escape(title)}</b>"),
                self.explained,
                w.HBox(
                    [w.VBox([f.widget, f.error]) for f in self.fields.values()],
                    layout=w.Layout(flex_flow="row wrap"),
                ),
                w.HBox([self.button, self.status]),
                self.current,
                self.history,
            ]
        )
        self._thread: threading.Thread | None = None
        self._busy = False
        self._checked()

    def note(self, point: Mapping[str, Any] | None = None) -> str:
        """How the point Run would run (``point``, default: now) relates to the sweep's,
        in a sentence or two."""
        if self._sweep is None:
            return "Runs the widgets' values alone, with the scale's defaults for the rest."
        if point is None:
            point = self.point()
        differ = [] if self._build is not None else self._differ
        held = ", ".join(
            f"{k}={v}" for k, v in point.items() if k not in self.fields and k not in differ
        )
        settings = (
            f"the sweep's other settings ({html.escape(held)})"
            if held
            else "the scale's defaults for the rest, as the sweep does"
        )
        text = (
            f"Runs with {settings} and records the point as the sweep does: a point the "
            "sweep also has is not run again by it, and the figure below marks the runs "
            "tried here."
        )
        if differ:
            first = ", ".join(f"{k}={self.base[k]}" for k in differ)
            text += f" Not shown here and set as in the sweep's first point: {html.escape(first)}."
        return text

    @property
    def values(self) -> dict[str, Any]:
        """The widgets' values; raises ParameterError naming the first refused one."""
        values, errors = self.read()
        if errors:
            name, why = next(iter(errors.items()))
            allowed = why.split("allowed: ", 1)[-1]
            raise ParameterError(name, self.fields[name].widget.value, allowed)
        return values

    def read(self) -> tuple[dict[str, Any], dict[str, str]]:
        """(the values that parse, {name: why refused} for those that do not)."""
        values, errors = {}, {}
        for name, f in self.fields.items():
            value, why = f.read()
            if why:
                errors[name] = why
            else:
                values[name] = value
        return values, errors

    def point(self) -> dict[str, Any]:
        """The point Run would run now (see ``values`` and ``build`` for what it raises)."""
        if self._build is not None:
            return dict(self._build(self.values))
        return {**self.base, **self.values}

    def _refusals(self) -> tuple[dict[str, Any] | None, dict[str, str]]:
        """(the point Run would run, or None; {field name, or "" for none: why refused})."""
        _, errors = self.read()
        if errors:
            return None, errors
        try:
            return self.point(), {}
        except ParameterError as e:  # from build: values that do not go together
            return None, {e.name if e.name in self.fields else "": str(e)}

    def _checked(self, _change: Any = None) -> bool:
        point, errors = self._refusals()
        for name, f in self.fields.items():
            why = errors.get(name, "")
            f.error.value = (
                f'<span class="distlab-refused" style="color:#b22;font-size:12px">'
                f"{html.escape(why)}</span>"
                if why
                else ""
            )
        if "" in errors:
            self.status.value = _red(f"refused: {errors['']}", REFUSED_POINT)
        elif REFUSED_POINT in self.status.value:
            self.status.value = ""
        if point is not None:
            self.explained.value = f'<div class="distlab-controls-note">{self.note(point)}</div>'
        self.button.disabled = bool(errors) or self._busy
        return not errors

    def _clicked(self, _button: Any) -> None:
        import ipywidgets as w

        if self._busy:
            return
        if not self._checked():
            bad = "; ".join(self._refusals()[1].values())
            self.status.value = _red(f"refused, nothing ran: {bad}")
            return
        point = self.point()
        self._busy = True
        self.button.disabled = True
        self.status.value = "running: " + html.escape(_label(point, self.fields))
        out = w.Output()
        self.current.children = (out,)  # the previous view goes; its run is in the table
        self._thread = threading.Thread(target=self._work, args=(point, out), daemon=True)
        self._thread.start()

    def _work(self, point: dict[str, Any], out: Any) -> None:
        from lab.cluster.view_render import state_words

        try:
            with recorded_as({CONTROLS_KEY: True}):
                result = self._run(point, out=out)
            self.runs.append((point, result))
            # the table first: "done" in the status line is the sign that everything is shown
            self.history.value = self._history()
            self.status.value = html.escape(_outcome(result, state_words))
        except ParameterError as e:  # checked before any process started
            self.status.value = _red(f"refused, nothing ran: {e}")
        except Exception as e:  # shown to the person who clicked; the sweep is unaffected
            log.exception("run from the controls failed")
            self.status.value = _red(f"failed: {type(e).__name__}: {e}")
        finally:
            self._busy = False
            self._checked()

    def _history(self) -> str:
        from lab.cluster.view_sweep import table_html
        from lab.experiments.outcome import state_of

        rows = [
            {
                "point": _label(point, self.fields),
                "state": state_of(result),
                "samples/s": _throughput(result, "total"),
                "run": str(getattr(result, "run_dir", "")).rsplit("/", 1)[-1],
            }
            for point, result in self.runs
        ]
        return (
            '<div class="distlab-controls-history"><div style="font-size:12px;color:#555">'
            f"tried here:</div>{table_html(rows)}</div>"
        )

    def tried(self) -> list[tuple[dict[str, Any], Path]]:
        """The points tried here whose runs succeeded, with their run directories."""
        return [
            (point, Path(result.run_dir))
            for point, result in self.runs
            if getattr(result, "ok", False) and getattr(result, "run_dir", None)
        ]

    def mark(
        self,
        fig: Any,
        x: str = "workers",
        y: str | Place = "per_rank",
        draw: Callable[[Path], Sequence[Any]] | None = None,
    ) -> Any:
        """A copy of ``fig`` with the runs tried here that succeeded drawn on it; ``fig``
        itself stays as the sweep drew it (the figure saved beside the verdict shows the
        verdict's runs only).

        Args:
            fig: a plotly figure.
            x: the point's parameter on the x axis of the stars.
            y: where a star goes up the y axis: ``"total"`` or ``"per_rank"``, the run's
                steady-state throughput (lab.experiments.protocol_runner.
                steady_throughput), or a function of (point, run directory) for a figure
                of another quantity (None: the run has no place on it).
            draw: for a figure that draws whole runs instead of points: a run directory
                -> its traces, as the room draws a run; they are added dotted, their
                legend names after ``TRIED``, instead of the stars.
        """
        import plotly.graph_objects as go

        marked = go.Figure(fig)
        done = self.tried()
        if draw is not None:
            for _point, run_dir in done:
                for trace in draw(run_dir):
                    _as_tried(trace)
                    marked.add_trace(trace)
            return marked
        place: Place = y if callable(y) else _throughput_of(y)
        stars = [(p, p.get(x), place(p, d)) for p, d in done]
        stars = [(p, at, value) for p, at, value in stars if value is not None]
        if not stars:
            return marked
        marked.add_trace(
            go.Scatter(
                x=[at for _, at, _ in stars],
                y=[value for _, _, value in stars],
                mode="markers",
                name=MARK_NAME,
                hovertext=[_label(p, self.fields) for p, _, _ in stars],
                hoverinfo="text+y",
                marker={"symbol": "star", "size": 16, "color": "#222", "line": {"width": 1}},
            )
        )
        return marked

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def _as_tried(trace: Any) -> None:
    """A room's trace of a run, restyled as a run tried in the controls."""
    trace.legendgroup = TRIED + str(trace.legendgroup or trace.name or "run")
    trace.name = TRIED + str(trace.name or "run")
    if "line" in trace:
        trace.line.dash = "dot"


def _throughput_of(measure: str) -> Place:
    def place(_point: Mapping[str, Any], run_dir: Path) -> float | None:
        from lab.experiments.protocol_runner import steady_throughput

        value = steady_throughput(run_dir)[measure]
        return None if math.isnan(value) else value

    return place


def _label(point: Mapping[str, Any], fields: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={point.get(k)}" for k in fields)


def _red(text: str, kind: str = "distlab-controls-said") -> str:
    return f"<span class='{kind}' style='color:#b22'>{html.escape(text)}</span>"


def _throughput(result: Any, measure: str) -> float | None:
    from lab.experiments.protocol_runner import steady_throughput

    run_dir = getattr(result, "run_dir", None)
    if not run_dir or not getattr(result, "ok", False):
        return None
    value = steady_throughput(run_dir)[measure]
    return None if math.isnan(value) else value


def _outcome(result: Any, words: Callable[[Any], str]) -> str:
    """The status line after a run: its state in words, seconds, throughput, or why not."""
    from lab.experiments.outcome import describe_end

    if not getattr(result, "ok", False):
        return f"done: {describe_end(result)}"
    value = _throughput(result, "total")
    rate = f" · {value:,.0f} samples/s (all ranks, steady)" if value is not None else ""
    seconds = getattr(result, "seconds", None)
    took = f" in {seconds:.1f} s" if isinstance(seconds, int | float) else ""
    return f"done: {words(getattr(result, 'state', result))}{took}{rate}"
