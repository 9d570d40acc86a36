"""The live view of a run: widgets in a notebook, a compact progress line without one.

Both are RunObservers (lab.cluster.launchers.base): the run's observer thread hands them
lines, a block at a time, which only go into a bounded RunTracker; drawing happens
elsewhere. ``RunView`` redraws from one refresher thread a few times a second by *setting*
widget values (never ``with out:`` from a thread), and draws the final state from
``on_end``, which the supervisor calls in the launching thread after the ranks exit, so a
notebook saved by papermill holds the final logs, status and plot. ``HeadlessProgress``
(lab.cluster.view_headless) prints a throttled line.
"""

from __future__ import annotations

import html
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from lab.cluster.launchers.base import Line, Lines, RunControl
from lab.cluster.view_headless import HeadlessProgress
from lab.cluster.view_hosts import hosts_html, hosts_text, read_timeline
from lab.cluster.view_kernel import in_notebook_kernel
from lab.cluster.view_render import (
    PLOT_PLACEHOLDER,
    log_html,
    plot_bundle,
    rank_label,
    sparkline_svg,
    status_html,
    status_text,
    summary_html,
)
from lab.cluster.view_state import LOG_LINES, RunTracker, Snapshot, end_reason
from lab.errors import ParameterError

__all__ = [
    "STOPPED_FROM_VIEW",
    "VIEW_MODES",
    "HeadlessProgress",
    "RunView",
    "ShownIn",
    "end_reason",
    "make_view",
]

log = logging.getLogger(__name__)

VIEW_MODES = ("auto", "widget", "headless", "none")
STOPPED_FROM_VIEW = "stopped from the view"


class RunView:
    """The notebook view of one run: status, Stop, one log tab per rank, throughput plot;
    on emulated hosts, each host's throttling (table, and bands on the plot).

    The status line is redrawn on every refresh, so its clock runs while the ranks are
    silent. After Stop, the reason comes first and what the processes printed as they were
    ended is folded under it.

    Args:
        refresh: seconds between redraws of the logs and status.
        plot_every: seconds between redraws of the plot (its JSON is the largest part).
        log_lines: lines kept in memory per rank (the rank's log file keeps every line).
        display: show the view in ``on_start``, with a plotly throughput plot beside it.
            False: the view is ``box``, for its owner to place inside another widget (the
            controls', a sweep's), with a compact plot inside it.
    """

    def __init__(
        self,
        refresh: float = 0.25,
        plot_every: float = 1.0,
        log_lines: int = LOG_LINES,
        display: bool = True,
    ) -> None:
        self.refresh_interval = refresh
        self.plot_every = plot_every
        self._display = display
        self._tracker = RunTracker(log_lines=log_lines)
        self._control: RunControl | None = None
        self._stop_event = threading.Event()
        self._draw_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._drawn = -1
        self._plotted = -1
        self._plotted_at = 0.0
        self._tab_ranks: list[int | None] = []
        self._box_handle: Any = None
        self._plot_handle: Any = None
        self._unroute: Any = None
        self.status: Any = None
        self.stop_button: Any = None
        self.tabs: Any = None
        self.logs: dict[int | None, Any] = {}
        self.hosts: Any = None
        self.spark: Any = None
        self.box: Any = None
        self.waiting: Any = None  # the status line while the run waits to start
        self._waiting_row: Any = None  # the waiting line, and Stop beside it
        self._waiting_handle: Any = None
        self._status_shown = ""

    # -- RunObserver ----------------------------------------------------------------------

    def on_pending(self, words: str, control: RunControl | None = None) -> None:
        """The run waits to start (``words``: why, e.g. a Slurm job's "queued (reason:
        Resources)"): a status line says so until the run starts, and then how long it
        waited; beside it, with ``control``, the Stop button, which ends the wait
        (lab.cluster.waiting). Shown at once with ``display``; else ``box`` holds it for
        the owner."""
        import ipywidgets as w

        self._tracker.pending(words)
        if control is not None and self._control is None:
            self._control = control
        snap = self._tracker.snapshot()
        if self.waiting is None:
            self.waiting = w.HTML(status_html(snap))
            row = [self.waiting]
            if self._control is not None:
                from lab.cluster.view_kernel import route_off_main_shell

                row.insert(0, self._new_stop_button())
                # the launching cell blocks while the job waits: Stop's clicks go elsewhere
                self._unroute = route_off_main_shell(self.stop_button)
            self._waiting_row = w.HBox(row)
            if self._display:
                from IPython.display import display

                self._waiting_handle = display(
                    self._waiting_bundle(snap), raw=True, display_id=True
                )
            else:
                self.box = w.VBox([self._waiting_row])
            return
        self.waiting.value = status_html(snap)
        if self._waiting_handle is not None:
            self._waiting_handle.update(self._waiting_bundle(snap), raw=True)

    def _waiting_bundle(self, snap: Snapshot) -> dict[str, Any]:
        """The waiting line (and its Stop) as a widget, with HTML and text for a saved
        notebook."""
        bundle = dict(self._waiting_row._repr_mimebundle_() or {})
        bundle.update({"text/html": status_html(snap), "text/plain": status_text(snap)})
        return bundle

    def _waited(self, started: bool = True) -> None:
        """The wait is over: the line says how long it was and why, once the run starts
        (its Stop then moves to the running run's line); how the run ended, when it
        ended before it started (stopped while queued)."""
        snap = self._tracker.snapshot()
        said = f"waited {snap.elapsed:.1f} s before starting: {snap.pending}"
        if started:
            self.waiting.value = f'<div style="color:#888">{html.escape(said)}</div>'
        else:
            self.waiting.value, said = status_html(snap), status_text(snap)
        self._waiting_row.children = [self.waiting]
        if self._waiting_handle is not None:
            self._waiting_handle.update(
                {"text/html": self.waiting.value, "text/plain": said}, raw=True
            )

    def _new_stop_button(self) -> Any:
        import ipywidgets as w

        self.stop_button = w.Button(
            description="Stop", icon="stop", button_style="danger", tooltip="end every rank"
        )
        self.stop_button.on_click(self._on_stop)
        return self.stop_button

    def on_start(self, run_dir: str, ranks: Sequence[int], control: RunControl) -> None:
        import ipywidgets as w

        from lab.cluster.view_kernel import route_off_main_shell

        if self.waiting is not None:
            self._waited()
        self._control = control
        self._tracker.start(run_dir, ranks)
        self.status = w.HTML(status_html(self._tracker.snapshot()))
        if self.stop_button is None:
            self._new_stop_button()
        self.tabs = w.Tab()
        for rank in ranks:
            self._add_tab(rank)
        self.hosts = w.HTML("")
        parts = [w.HBox([self.stop_button, self.status]), self.hosts]
        if self.waiting is not None and not self._display:
            parts.insert(0, self.waiting)
        if not self._display:
            self.spark = w.HTML(sparkline_svg(self._tracker.snapshot()))
            parts.append(self.spark)
        if self.box is not None:  # the waiting line's box, already placed by its owner
            self.box.children = [*parts, self.tabs]
        else:
            self.box = w.VBox([*parts, self.tabs])
        if self._display:
            from IPython.display import display

            snap = self._tracker.snapshot()
            self._box_handle = display(self._box_bundle(snap), raw=True, display_id=True)
            self._plot_handle = display(plot_bundle(snap), raw=True, display_id=True)
        # The launching cell may block the main shell (a sweep); Stop's clicks go elsewhere.
        if self._unroute is None:
            self._unroute = route_off_main_shell(self.stop_button)
        self._stop_event.clear()
        self._thread = threading.Thread(target=self._refresher, name="distlab-view", daemon=True)
        self._thread.start()

    def on_line(self, line: Line) -> None:
        self._tracker.add(line)

    def on_lines(self, block: Lines) -> None:
        self._tracker.add_lines(block)

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, int | None]) -> None:
        reason = end_reason(self._tracker.run_dir)
        self._tracker.end(state, exit_code, rank_exit_codes, reason)
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.stop_button is not None:
            self.stop_button.disabled = True
            self.stop_button.layout.display = "none"  # the status says how the run ended
        if self.status is None and self.waiting is not None:
            self._waited(started=False)
        self.refresh(plot=True)
        if self._unroute is not None:
            self._unroute()
            self._unroute = None
        if self._box_handle is not None:
            self._box_handle.update(self._box_bundle(self._tracker.snapshot()), raw=True)

    # -- drawing --------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The tracker's current state (what the next redraw will show)."""
        return self._tracker.snapshot()

    def refresh(self, plot: bool = False) -> None:
        """Redraw now: set the status and log widgets' values, and the plot if asked."""
        if self.status is None:
            return
        with self._draw_lock:
            self._draw(self._tracker.snapshot(), plot)

    def _draw(self, snap: Snapshot, plot: bool) -> None:
        status = status_html(snap)  # the clock moves even when no line came
        if status != self._status_shown:
            self._status_shown = self.status.value = status
        if snap.version != self._drawn:
            self._drawn = snap.version
            for rank in [*snap.logs, *snap.after_stop]:
                if rank not in self.logs:
                    self._add_tab(rank)
            for rank in self.logs:
                entries, after = snap.logs.get(rank, ()), snap.after_stop.get(rank, ())
                self.logs[rank].value = log_html(entries, after=after)
        if plot and snap.version != self._plotted:
            self._plotted = snap.version
            self._plotted_at = time.monotonic()
            hosts = read_timeline(snap.run_dir) if snap.run_dir else None
            self.hosts.value = hosts_html(hosts)
            if self.spark is not None:
                self.spark.value = sparkline_svg(snap)
            if self._plot_handle is not None:
                # JupyterLab hands an update of the same mimetype to the live renderer, and
                # plotly's renderer ignores it; a placeholder of another type in between
                # makes JupyterLab draw the new figure afresh.
                self._plot_handle.update(PLOT_PLACEHOLDER, raw=True)
                self._plot_handle.update(plot_bundle(snap, hosts), raw=True)

    def _refresher(self) -> None:
        while not self._stop_event.wait(self.refresh_interval):
            try:
                due = time.monotonic() - self._plotted_at >= self.plot_every
                self.refresh(plot=due)
            except Exception:  # a redraw must never end the run; the next one retries
                log.exception("run view redraw failed")

    def _add_tab(self, rank: int | None) -> None:
        import ipywidgets as w

        self.logs[rank] = w.HTML(log_html(()), layout=w.Layout(width="100%"))
        self._tab_ranks.append(rank)
        self.tabs.children = [*self.tabs.children, self.logs[rank]]
        self.tabs.set_title(len(self._tab_ranks) - 1, rank_label(rank))

    def _box_bundle(self, snap: Snapshot) -> dict[str, Any]:
        bundle = dict(self.box._repr_mimebundle_() or {})
        hosts = read_timeline(snap.run_dir) if snap.run_dir else None
        bundle["text/html"] = summary_html(snap, hosts=hosts, plot=self.spark is not None)
        bundle["text/plain"] = "\n".join(filter(None, [status_text(snap), hosts_text(hosts)]))
        return bundle

    def _on_stop(self, _button: Any) -> None:
        self.stop_button.disabled = True
        self.stop_button.description = "Stopping…"
        self._tracker.stopping(STOPPED_FROM_VIEW)
        if self._control is not None:
            self._control.cancel(STOPPED_FROM_VIEW)


def make_view(mode: str | None = "auto") -> Any:
    """The observer a launch shows its run with.

    Args:
        mode: ``"auto"`` (inside a sweep's view, lab.cluster.view_sweep: a view in its box;
            else widgets when a notebook frontend runs this kernel, else a progress line),
            ``"widget"``, ``"headless"``, or ``"none"``/None (no view).
    """
    if mode is None or mode == "none":
        return None
    if mode not in VIEW_MODES:
        raise ParameterError("view", mode, ", ".join(VIEW_MODES))
    if mode == "auto":
        from lab.cluster.view_sweep import active_sweep

        sweep = active_sweep()
        if sweep is not None:
            return sweep.next_view(RunView(display=False))
        mode = "widget" if in_notebook_kernel() else "headless"
    return RunView() if mode == "widget" else HeadlessProgress()


class ShownIn:
    """A RunView drawn inside an ``ipywidgets.Output`` (for runs started by a button, in a
    worker thread, where ``display`` would not know which output to use)."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.view = RunView(display=False)

    def on_start(self, run_dir: str, ranks: Sequence[int], control: Any) -> None:
        shown = self.view.box is not None  # the waiting line's box, filled in now
        self.view.on_start(run_dir, ranks, control)
        if not shown:
            self.out.append_display_data(self.view.box)

    def on_pending(self, words: str, control: RunControl | None = None) -> None:
        shown = self.view.box is not None
        self.view.on_pending(words, control)
        if not shown:
            self.out.append_display_data(self.view.box)

    def on_line(self, line: Any) -> None:
        self.view.on_line(line)

    def on_lines(self, block: Any) -> None:
        self.view.on_lines(block)

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, Any]) -> None:
        self.view.on_end(state, exit_code, rank_exit_codes)
