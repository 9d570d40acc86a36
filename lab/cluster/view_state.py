"""What the run views know about a run in progress, kept apart from how they show it.

Reader threads call ``RunTracker.add`` for every line, so it only appends to bounded
deques under one short lock; the views take a ``Snapshot`` when they redraw. Throughput
comes from the lab's ``step`` records (samples / seconds) and, for unmodified upstream
scripts, from Horovod's and KungFu's ``Iter #k: X img/sec per ...`` lines.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lab.cluster.launchers.base import Line
from lab.metrics.records import PREFIX, parse_record

LOG_LINES = 500  # per rank, in memory; the rank's log file keeps every line
SERIES_POINTS = 2000  # per rank, for the throughput plot

# Horovod's and KungFu's synthetic benchmarks: "Iter #3: 152.4 img/sec per GPU".
_ITER_RATE = re.compile(r"Iter #\d+:\s*([0-9.]+(?:[eE][-+]?\d+)?)\s*img/sec per")


def throughput_of(text: str) -> tuple[int | None, float] | None:
    """The (rank named in the line, samples per second) a line reports, or None.

    Cheap on lines that report nothing: one substring test each before any parsing.
    """
    if PREFIX in text:
        rec = parse_record(text)
        if rec is None or rec.get("kind") != "step":
            return None
        samples, seconds = rec.get("samples"), rec.get("seconds")
        if not isinstance(samples, int | float) or not isinstance(seconds, int | float):
            return None
        if seconds <= 0:
            return None
        rank = rec.get("rank")
        return (rank if isinstance(rank, int) else None), float(samples) / float(seconds)
    if "img/sec per" in text:
        m = _ITER_RATE.search(text)
        if m:
            return None, float(m.group(1))
    return None


@dataclass(frozen=True)
class Snapshot:
    """A consistent copy of a tracker's state, safe to render in any thread.

    ``logs`` maps a rank (None: lines no rank could be told for) to its last lines as
    (stream, text); ``series`` maps a rank to (elapsed seconds, samples/s) points.
    """

    run_dir: str
    ranks: tuple[int, ...]
    state: str
    elapsed: float
    lines: int
    logs: Mapping[int | None, tuple[tuple[str, str], ...]]
    rates: Mapping[int, float]
    series: Mapping[int, tuple[tuple[float, float], ...]]
    exit_code: int | None
    rank_exit_codes: Mapping[int, int | None]
    version: int


class RunTracker:
    """Thread-safe record of one run: bounded per-rank logs, throughput, state."""

    def __init__(self, log_lines: int = LOG_LINES, series_points: int = SERIES_POINTS) -> None:
        self._lock = threading.Lock()
        self._log_lines = log_lines
        self._series_points = series_points
        self.run_dir = ""
        self.ranks: tuple[int, ...] = ()
        self.state = "starting"
        self._t0 = time.monotonic()
        self._t1: float | None = None
        self._lines = 0
        self._logs: dict[int | None, deque[tuple[str, str]]] = {}
        self._rates: dict[int, float] = {}
        self._series: dict[int, deque[tuple[float, float]]] = {}
        self._exit_code: int | None = None
        self._rank_exit_codes: dict[int, int | None] = {}
        self.version = 0  # bumped on every change; views redraw when it moves

    def start(self, run_dir: str, ranks: Sequence[int]) -> None:
        """Begin the run: the clock starts and every rank gets an empty log."""
        with self._lock:
            self.run_dir = str(run_dir)
            self.ranks = tuple(ranks)
            self.state = "running"
            self._t0 = time.monotonic()
            self._t1 = None
            for r in self.ranks:
                self._logs.setdefault(r, deque(maxlen=self._log_lines))
            self.version += 1

    def add(self, line: Line) -> None:
        """Take one line (from any reader thread); cheap and never blocks for long."""
        rate = throughput_of(line.text)
        rank = line.rank
        if rank is None and rate is not None and rate[0] is not None:
            rank = rate[0]
        now = time.monotonic()
        with self._lock:
            log = self._logs.get(rank)
            if log is None:
                log = self._logs[rank] = deque(maxlen=self._log_lines)
            log.append((line.stream, line.text))
            self._lines += 1
            if rate is not None and rank is not None:
                self._rates[rank] = rate[1]
                pts = self._series.get(rank)
                if pts is None:
                    pts = self._series[rank] = deque(maxlen=self._series_points)
                pts.append((now - self._t0, rate[1]))
            self.version += 1

    def end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, int | None]) -> None:
        """Record how the run ended; the clock stops."""
        with self._lock:
            self.state = state
            self._t1 = time.monotonic()
            self._exit_code = exit_code
            self._rank_exit_codes = dict(rank_exit_codes)
            self.version += 1

    def snapshot(self) -> Snapshot:
        """A copy of everything, taken under the lock in one go."""
        with self._lock:
            end = self._t1 if self._t1 is not None else time.monotonic()
            return Snapshot(
                run_dir=self.run_dir,
                ranks=self.ranks,
                state=self.state,
                elapsed=end - self._t0,
                lines=self._lines,
                logs={r: tuple(d) for r, d in self._logs.items()},
                rates=dict(self._rates),
                series={r: tuple(d) for r, d in self._series.items()},
                exit_code=self._exit_code,
                rank_exit_codes=dict(self._rank_exit_codes),
                version=self.version,
            )
