"""The run view without a notebook: a progress line, printed at most every few seconds.

A run launched from a script or a batch job has no widgets to draw in, yet a person
watching its output wants to know it is alive and how fast it goes; ``HeadlessProgress``
is the RunObserver that says so in one throttled line (lab.cluster.view picks it).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TextIO

from lab.cluster.launchers.base import Line, Lines, RunControl
from lab.cluster.view_hosts import hosts_text, read_timeline
from lab.cluster.view_render import run_name, status_text
from lab.cluster.view_state import RunTracker, end_reason


class HeadlessProgress:
    """Prints a compact progress line at most every ``interval`` seconds, and the end.

    Args:
        interval: seconds between progress lines.
        stream: where to print (default: ``sys.stdout`` at the time of printing).
    """

    def __init__(self, interval: float = 5.0, stream: TextIO | None = None) -> None:
        self.interval = interval
        self._stream = stream
        self._tracker = RunTracker(log_lines=1)
        self._lock = threading.Lock()
        self._last = 0.0

    def _print(self, text: str) -> None:
        out = self._stream or sys.stdout
        out.write(text + "\n")
        out.flush()

    def on_pending(self, words: str, control: RunControl | None = None) -> None:
        """Print why the run waits, each time that changes (a Slurm job's queue)."""
        self._tracker.pending(words)
        self._print(status_text(self._tracker.snapshot()))

    def on_start(self, run_dir: str, ranks: Sequence[int], control: RunControl) -> None:
        self._tracker.start(run_dir, ranks)
        self._last = time.monotonic()
        self._print(f"[run {run_name(run_dir)}] started {len(ranks)} ranks in {run_dir}")

    def on_line(self, line: Line) -> None:
        self._tracker.add(line)
        self._maybe_print()

    def on_lines(self, block: Lines) -> None:
        self._tracker.add_lines(block)
        self._maybe_print()

    def _maybe_print(self) -> None:
        now = time.monotonic()
        if now - self._last < self.interval or not self._lock.acquire(blocking=False):
            return
        try:
            if now - self._last >= self.interval:
                self._last = now
                self._print(status_text(self._tracker.snapshot()))
        finally:
            self._lock.release()

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, int | None]) -> None:
        self._tracker.end(state, exit_code, rank_exit_codes, end_reason(self._tracker.run_dir))
        with self._lock:
            snap = self._tracker.snapshot()
            self._print(status_text(snap))
            hosts = hosts_text(read_timeline(snap.run_dir)) if snap.run_dir else ""
            if hosts:
                self._print(f"[run {run_name(snap.run_dir)}] hosts: {hosts}")
