"""A live line of a monitored value (e.g. the gradient noise scale) while ranks run.

``MetricTrace`` is a run observer (see lab.cluster's RunObserver): reader threads hand it
lines; it keeps the ``metric`` records it cares about and redraws one plotly figure through
a display handle at most every ``every`` seconds, and once more when the run ends, so the
saved notebook holds the whole line. Several runs can share one trace (one line per run
label and rank), which is how a sweep shows its monitored values side by side.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lab.metrics.records import parse_record


class MetricTrace:
    """Collect ``metric`` records named ``names`` (or step-record fields of those names)
    and keep a live figure of them.

    Args:
        names: metric names to follow (e.g. ``("noise_scale", "variance")``).
        title: the figure's title.
        every: seconds between redraws while a run goes.
        display: show the figure (False in tests: read ``points`` instead).
    """

    def __init__(
        self,
        names: Iterable[str],
        title: str = "monitored value",
        every: float = 2.0,
        display: bool = True,
    ) -> None:
        self.names = set(names)
        self.title = title
        self.every = every
        self.label = ""
        self.points: dict[tuple[str, str, int], list[tuple[int, float]]] = {}
        self._lock = threading.Lock()
        self._drawn_at = 0.0
        self._live: Any = None
        if display:
            from lab.metrics.sweep import LiveFigure

            self._live = LiveFigure()

    def for_run(self, label: str) -> MetricTrace:
        """Name the next run's lines (e.g. ``"variance, interval 8"``); returns self."""
        self.label = label
        return self

    # -- RunObserver --------------------------------------------------------------------

    def on_start(self, run_dir: str, ranks: Sequence[int], control: Any) -> None:
        self.label = self.label or run_dir.rsplit("/", 1)[-1]

    def on_line(self, line: Any) -> None:
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
        with self._lock:
            for name, value in values.items():
                self.points.setdefault((self.label, name, rank), []).append((step, float(value)))
        if time.monotonic() - self._drawn_at >= self.every:
            self.draw()

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, Any]) -> None:
        self.draw()
        self.label = ""

    # -- drawing -----------------------------------------------------------------------

    def figure(self) -> Any:
        import plotly.graph_objects as go

        fig = go.Figure()
        with self._lock:
            items = sorted(self.points.items())
        for (label, name, rank), pts in items:
            fig.add_trace(
                go.Scatter(
                    x=[s for s, _ in pts],
                    y=[v for _, v in pts],
                    mode="lines",
                    name=f"{label} · {name} · rank {rank}",
                )
            )
        fig.update_layout(title=self.title, xaxis_title="step", yaxis_title="value", height=320)
        return fig

    def draw(self) -> None:
        self._drawn_at = time.monotonic()
        if self._live is not None:
            self._live.show(self.figure())
