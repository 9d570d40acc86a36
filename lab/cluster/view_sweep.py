"""One live view for a run of many points: the running point's run view and a small table of
the points done, instead of one full view per point stacked above the figure.

A ``SweepView`` is entered around the loop that runs the points. While it is active, a
launch that asks for the ``"auto"`` view (lab.cluster.view.make_view) gets a run view drawn
inside the sweep's box, which replaces the previous point's; the loop says which point runs
next (``running``) and reports each one done (``done``). Outside a notebook kernel it is
inert and every run keeps its own progress line. The saved notebook holds the table as
HTML (the widget's fallback), updated when the sweep ends.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from lab.cluster.launchers.base import Line, Lines, RunControl
from lab.cluster.view_render import state_words, status_html

_ACTIVE: ContextVar[SweepView | None] = ContextVar("distlab_sweep_view", default=None)
_STATE_COLOURS = {"succeeded": "#2ca02c", "running": "#1f77b4"}


def active_sweep() -> SweepView | None:
    """The sweep view the current loop shows its runs in, if any."""
    return _ACTIVE.get()


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "—" if math.isnan(value) else f"{value:,.1f}"
    return html.escape("—" if value is None else str(value))


def table_html(rows: Sequence[Mapping[str, Any]], limit: int = 30) -> str:
    """The points done as a compact HTML table (columns: the first row's keys), the newest
    ``limit`` rows; a ``state`` column is coloured and written in words."""
    if not rows:
        return '<div class="distlab-sweep-table" style="color:#888">no point done yet</div>'
    cols = list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for row in rows[-limit:]:
        cells = []
        for c in cols:
            value = row.get(c)
            if c == "state":
                colour = _STATE_COLOURS.get(str(value), "#d62728")
                cells.append(f'<td style="color:{colour}">{_cell(state_words(value))}</td>')
            else:
                cells.append(f"<td>{_cell(value)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    more = f"<caption>last {limit} of {len(rows)}</caption>" if len(rows) > limit else ""
    return (
        f'<table class="distlab-sweep-table" style="font-size:12px">{more}'
        f"<tr>{head}</tr>{''.join(body)}</table>"
    )


class _PointView:
    """The run view of the point that runs now, placed in the sweep's box when it starts."""

    def __init__(self, sweep: SweepView, view: Any) -> None:
        self.sweep, self.view = sweep, view

    def on_pending(self, words: str, control: RunControl | None = None) -> None:
        self.view.on_pending(words, control)
        if self.view.box is not None:
            self.sweep._show_current(self.view.box)

    def on_start(self, run_dir: str, ranks: Sequence[int], control: RunControl) -> None:
        self.view.on_start(run_dir, ranks, control)
        self.sweep._show_current(self.view.box)

    def on_line(self, line: Line) -> None:
        self.view.on_line(line)

    def on_lines(self, block: Lines) -> None:
        self.view.on_lines(block)

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, Any]) -> None:
        self.view.on_end(state, exit_code, rank_exit_codes)
        self.sweep.last = self.view.snapshot()


class SweepView:
    """The box a sweep shows its points in (see the module docstring).

    Args:
        title: what runs, e.g. the experiment's name.
        total: how many points (or runs) there are, for the header.
        display: show the box when entered (False for tests that read widget values).
        widgets: draw widgets at all; None: only in a notebook kernel.
    """

    def __init__(
        self, title: str, total: int, display: bool = True, widgets: bool | None = None
    ) -> None:
        from lab.cluster.view_kernel import in_notebook_kernel

        self.title = title
        self.total = total
        self.enabled = in_notebook_kernel() if widgets is None else widgets
        self._display = display
        self.rows: list[dict[str, Any]] = []
        self.label = ""
        self.last: Any = None  # the Snapshot of the last run that ended
        self._token: Any = None
        self._handle: Any = None
        self.header: Any = None
        self.current: Any = None
        self.table: Any = None
        self.box: Any = None

    # -- the loop's side ----------------------------------------------------------------

    def __enter__(self) -> SweepView:
        if not self.enabled:
            return self
        import ipywidgets as w

        self.header = w.HTML(self._header())
        self.current = w.VBox([])
        self.table = w.HTML(table_html(self.rows))
        self.box = w.VBox([self.header, self.current, self.table])
        if self._display:
            from IPython.display import display

            self._handle = display(self._bundle(), raw=True, display_id=True)
        self._token = _ACTIVE.set(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None
        if self.enabled:
            self.label = ""
            self.header.value = self._header()
            if self._handle is not None:  # the saved notebook keeps the final table
                self._handle.update(self._bundle(), raw=True)

    def running(self, label: str) -> None:
        """The point that runs next (shown in the header)."""
        self.label = label
        if self.enabled:
            self.header.value = self._header()

    def done(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """The points done so far, one dict per row (same keys in every row)."""
        self.rows = [dict(r) for r in rows]
        if self.enabled:
            self.table.value = table_html(self.rows)
            self.header.value = self._header()

    def next_view(self, view: Any) -> _PointView:
        """The observer for the run that starts next (what ``make_view("auto")`` gives):
        ``view``, an undisplayed RunView, drawn in this sweep's box. The caller makes it, so
        that this module needs nothing from lab.cluster.view."""
        return _PointView(self, view)

    # -- drawing --------------------------------------------------------------------------

    def _show_current(self, box: Any) -> None:
        if self.current is not None:
            self.current.children = (box,)

    def _header(self) -> str:
        done = len(self.rows)
        now = f" · running: {html.escape(self.label)}" if self.label else ""
        return (
            f'<div class="distlab-sweep-header"><b>{html.escape(self.title)}</b>: '
            f"{done} of {self.total} done{now}</div>"
        )

    def _bundle(self) -> dict[str, Any]:
        bundle = dict(self.box._repr_mimebundle_() or {})
        last = status_html(self.last) if self.last is not None else ""
        bundle["text/html"] = "\n".join([self._header(), table_html(self.rows, limit=200), last])
        now = f", running: {self.label}" if self.label else ""
        bundle["text/plain"] = f"{self.title}: {len(self.rows)} of {self.total} done{now}"
        return bundle
