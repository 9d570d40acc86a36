"""What the run views know about a run in progress, kept apart from how they show it.

The run's observer thread calls ``RunTracker.add`` for a line, ``add_lines`` for a
block of them, so it only appends to bounded deques under one short lock; the views take
a ``Snapshot`` when they redraw. Throughput comes from the lab's ``step`` records
(samples / seconds) and, for unmodified upstream scripts, from Horovod's and KungFu's
``Iter #k: X img/sec per ...`` lines. Why a run ended is the manifest's ``reason``
(``end_reason``), which both views show.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lab.cluster.launchers.base import Line, Lines
from lab.cluster.lines import last_lines
from lab.metrics.records import PREFIX, parse_record
from lab.metrics.tags import strip_ansi

LOG_LINES = 500  # per rank, in memory; the rank's log file keeps every line
SERIES_POINTS = 2000  # per rank, for the throughput plot

# Horovod's and KungFu's synthetic benchmarks: "Iter #3: 152.4 img/sec per GPU".
_ITER_RATE = re.compile(r"Iter #\d+:\s*([0-9.]+(?:[eE][-+]?\d+)?)\s*img/sec per")


def step_of(text: str) -> tuple[int | None, float, float] | None:
    """The (rank named in the line, samples, seconds) of a lab ``step`` record, or None."""
    if PREFIX not in text:
        return None
    rec = parse_record(text)
    if rec is None or rec.get("kind") != "step":
        return None
    samples, seconds = rec.get("samples"), rec.get("seconds")
    if not isinstance(samples, int | float) or not isinstance(seconds, int | float):
        return None
    if seconds <= 0:
        return None
    rank = rec.get("rank")
    return (rank if isinstance(rank, int) else None), float(samples), float(seconds)


def throughput_of(text: str) -> tuple[int | None, float] | None:
    """The (rank named in the line, samples per second) a line reports, or None.

    Cheap on lines that report nothing: one substring test each before any parsing.
    """
    if PREFIX in text:
        step = step_of(text)
        return None if step is None else (step[0], step[1] / step[2])
    if "img/sec per" in text:
        m = _ITER_RATE.search(text)
        if m:
            return None, float(m.group(1))
    return None


def end_reason(run_dir: str) -> str:
    """Why a run ended, in the supervisor's words (the manifest's ``reason``, written
    before the observers hear of the end); empty when there is none to read."""
    if not run_dir:
        return ""
    try:
        with open(f"{run_dir}/manifest.json", encoding="utf-8") as f:
            reason = json.load(f).get("reason")
    except (OSError, ValueError, AttributeError):
        return ""
    return reason if isinstance(reason, str) else ""


@dataclass(frozen=True)
class Snapshot:
    """A consistent copy of a tracker's state, safe to render in any thread.

    ``logs`` maps a rank (None: lines no rank could be told for) to its last lines as
    (stream, text); ``after_stop`` holds, the same way, the lines that came after Stop
    was pressed (the engine's reaction to being ended, shown folded under the reason);
    ``series`` maps a rank to (elapsed seconds, samples/s) points; ``steps`` maps a rank
    to the (samples, seconds) of its step records so far. ``stopping`` is why the run was
    asked to stop (empty if it was not), ``reason`` how it ended (the manifest's words),
    ``pending`` why it waited before it started (a scheduler's words; state ``queued``).
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
    after_stop: Mapping[int | None, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    steps: Mapping[int, tuple[float, float]] = field(default_factory=dict)
    stopping: str = ""
    reason: str = ""
    pending: str = ""

    @property
    def throughput(self) -> float | None:
        """Samples per second over the run so far, summed over ranks (each rank's samples
        over its step seconds); None before any step record."""
        rates = [n / s for n, s in self.steps.values() if s > 0]
        return sum(rates) if rates else None


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
        self._logs: dict[int | None, deque[tuple[str, str, bool]]] = {}
        self._rates: dict[int, float] = {}
        self._series: dict[int, deque[tuple[float, float]]] = {}
        self._exit_code: int | None = None
        self._rank_exit_codes: dict[int, int | None] = {}
        self._steps: dict[int, tuple[float, float]] = {}
        self._stopping = ""
        self._reason = ""
        self._pending = ""
        self.version = 0  # bumped on every change; views redraw when it moves

    def pending(self, words: str) -> None:
        """The run waits before it starts (``words``: why); the clock counts the wait."""
        with self._lock:
            if self.state != "queued":
                self._t0 = time.monotonic()
            self.state = "queued"
            self._pending = words
            self.version += 1

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
        step = step_of(line.text)
        if step is not None:
            rate: tuple[int | None, float] | None = (step[0], step[1] / step[2])
        else:  # a record that is not a step reports no rate; upstream text may
            rate = None if PREFIX in line.text else throughput_of(line.text)
        rank = line.rank
        if rank is None and rate is not None and rate[0] is not None:
            rank = rate[0]
        now = time.monotonic()
        with self._lock:
            log = self._logs.get(rank)
            if log is None:
                log = self._logs[rank] = deque(maxlen=self._log_lines)
            # colour codes are kept in the raw rank logs, stripped for the view
            log.append((line.stream, strip_ansi(line.text), bool(self._stopping)))
            self._lines += 1
            if rate is not None and rank is not None:
                self._rates[rank] = rate[1]
                pts = self._series.get(rank)
                if pts is None:
                    pts = self._series[rank] = deque(maxlen=self._series_points)
                pts.append((now - self._t0, rate[1]))
                if step is not None:
                    n, s = self._steps.get(rank, (0.0, 0.0))
                    self._steps[rank] = (n + step[1], s + step[2])
            self.version += 1

    def add_lines(self, block: Lines) -> None:
        """Take a block of one rank's lines (from the observer thread) as ``add`` takes
        each: a block that may report throughput goes line by line; any other only
        counts its lines and keeps its last ``log_lines``, without a string per line."""
        text = block.text
        if PREFIX in text or "img/sec per" in text:
            for line in block.lines:
                self.add(Line(block.rank, block.stream, line))
            return
        tail = last_lines(text, self._log_lines)
        if "\x1b" in text:
            tail = [strip_ansi(t) for t in tail]
        n = text.count("\n")
        with self._lock:
            log = self._logs.get(block.rank)
            if log is None:
                log = self._logs[block.rank] = deque(maxlen=self._log_lines)
            after = bool(self._stopping)
            log.extend((block.stream, t, after) for t in tail)
            self._lines += n
            self.version += 1

    def stopping(self, reason: str) -> None:
        """Stop was asked for: lines from now on are the engine's reaction to it."""
        with self._lock:
            if not self._stopping:
                self._stopping = reason
                self.version += 1

    def end(
        self,
        state: str,
        exit_code: int,
        rank_exit_codes: Mapping[int, int | None],
        reason: str = "",
    ) -> None:
        """Record how the run ended (``reason``: the supervisor's words); the clock stops."""
        with self._lock:
            self.state = state
            self._reason = reason
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
                logs={r: tuple((s, t) for s, t, a in d if not a) for r, d in self._logs.items()},
                after_stop={
                    r: after
                    for r, d in self._logs.items()
                    if (after := tuple((s, t) for s, t, a in d if a))
                },
                rates=dict(self._rates),
                series={r: tuple(d) for r, d in self._series.items()},
                exit_code=self._exit_code,
                rank_exit_codes=dict(self._rank_exit_codes),
                version=self.version,
                steps=dict(self._steps),
                stopping=self._stopping,
                reason=self._reason,
                pending=self._pending,
            )
