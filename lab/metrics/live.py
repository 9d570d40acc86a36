"""A live line of a monitored value (e.g. the gradient noise scale) while ranks run.

``MetricTrace`` is a run observer (see lab.cluster's RunObserver). Reader threads hand it
lines and it only appends the ``metric`` records it cares about (DESIGN.md, contract 5:
the very runs that measure monitoring overhead must not pay for a plot). Drawing happens
elsewhere, as in lab.cluster.view.RunView: the first display in ``on_start`` (the
launching thread, so the figure lands in the cell that runs), then a refresher thread
redraws through the display handle at most every ``every`` seconds when points arrived,
and ``on_end`` (the launching thread again, after the ranks exit) draws the final figure,
so the saved notebook holds the whole line. Several runs can share one trace (one line
per run label and rank), which is how a sweep shows its monitored values side by side.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lab.metrics.records import parse_record

log = logging.getLogger(__name__)


class MetricTrace:
    """Collect ``metric`` records named ``names`` (or step-record fields of those names)
    and keep a live figure of them.

    Args:
        names: metric names to follow (e.g. ``("noise_scale", "variance")``).
        title: the figure's title.
        every: seconds between redraws while a run goes.
        display: show the figure (False in tests: read ``points`` instead).
        split: step-record fields whose values, joined by ":", name a record's line in
            place of the run's label (``("policy", "start_batch")``: a line per arm of a
            run that trains several one after another).
        sink: what to draw into: anything with ``show(figure)``; default a
            lab.metrics.sweep.LiveFigure when ``display`` is true.
    """

    def __init__(
        self,
        names: Iterable[str],
        title: str = "monitored value",
        every: float = 2.0,
        display: bool = True,
        sink: Any = None,
        split: Sequence[str] = (),
    ) -> None:
        self.names = set(names)
        self.split = tuple(split)
        self.title = title
        self.every = every
        self.label = ""
        self.points: dict[tuple[str, str, int], list[tuple[int, float]]] = {}
        self._lock = threading.Lock()  # guards points and version (reader threads)
        self._draw_lock = threading.Lock()  # one redraw at a time
        self._version = 0
        self._drawn = -1
        self._shown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Any = sink
        if sink is None and display:
            from lab.metrics.sweep import LiveFigure

            self._live = LiveFigure()

    def for_run(self, label: str) -> MetricTrace:
        """Name the next run's lines (e.g. ``"variance, interval 8"``); returns self."""
        self.label = label
        return self

    # -- RunObserver --------------------------------------------------------------------

    def on_start(self, run_dir: str, ranks: Sequence[int], control: Any) -> None:
        self.label = self.label or run_dir.rsplit("/", 1)[-1]
        if self._live is None:
            return
        if not self._shown:
            self.draw()  # the first display, from the launching thread
        self._stop.clear()
        self._thread = threading.Thread(target=self._refresher, name="distlab-trace", daemon=True)
        self._thread.start()

    def on_line(self, line: Any) -> None:
        """Keep the line's monitored values; no drawing (called from reader threads)."""
        rec = parse_record(line.text)
        if not rec:
            return
        if rec.get("kind") == "metric" and rec.get("name") in self.names:
            values = {str(rec["name"]): rec.get("value")}
        elif rec.get("kind") == "step":  # workloads may carry monitored values on steps
            values = {k: rec[k] for k in self.names if rec.get(k) is not None}
        else:
            return
        rank = int(rec.get("rank", line.rank if line.rank is not None else -1))
        step = int(rec.get("step", 0))
        parts = [str(rec[k]) for k in self.split if rec.get(k) is not None]
        label = ":".join(parts) if parts else self.label
        with self._lock:
            for name, value in values.items():
                self.points.setdefault((label, name, rank), []).append((step, float(value)))
            self._version += 1

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, Any]) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.draw()
        self.label = ""

    # -- drawing -----------------------------------------------------------------------

    def figure(self) -> Any:
        import plotly.graph_objects as go

        from lab.metrics.figure_style import series_name, style

        fig = go.Figure()
        with self._lock:
            items = sorted((k, list(v)) for k, v in self.points.items())
        for (label, name, rank), pts in items:
            fig.add_trace(
                go.Scatter(
                    x=[s for s, _ in pts],
                    y=[v for _, v in pts],
                    mode="lines",
                    name=series_name(label, name, f"rank {rank}"),
                )
            )
        fig.update_layout(title=self.title, xaxis_title="step", yaxis_title="value")
        return style(fig, height=360)

    def draw(self) -> None:
        """Draw the current points now (the refresher and ``on_end`` call this)."""
        if self._live is None:
            return
        with self._draw_lock:
            with self._lock:
                version = self._version
            self._live.show(self.figure())
            self._drawn, self._shown = version, True

    def _refresher(self) -> None:
        while not self._stop.wait(self.every):
            try:
                with self._lock:
                    changed = self._version != self._drawn
                if changed:
                    self.draw()
            except Exception:  # a redraw must never end the run; the next one retries
                log.exception("metric trace redraw failed")
