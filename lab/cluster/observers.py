"""Small RunObservers that combine others (``launch`` takes one view)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lab.cluster.launchers.base import Line, Lines, RunControl, RunObserver


class FanOut:
    """One RunObserver that hands every event to several, in order; None entries are
    skipped, so ``FanOut(make_view("auto"), extra)`` works when there is no view."""

    def __init__(self, *observers: RunObserver | None) -> None:
        self.observers = [o for o in observers if o is not None]

    def on_start(self, run_dir: str, ranks: Sequence[int], control: RunControl) -> None:
        for obs in self.observers:
            obs.on_start(run_dir, ranks, control)

    def on_pending(self, words: str, control: RunControl) -> None:
        for obs in self.observers:
            pending = getattr(obs, "on_pending", None)
            if callable(pending):
                pending(words, control)

    def on_line(self, line: Line) -> None:
        for obs in self.observers:
            obs.on_line(line)

    def on_lines(self, block: Lines) -> None:
        """A block to each observer: whole to those with ``on_lines``, else line by line."""
        lines: list[Line] | None = None
        for obs in self.observers:
            bulk = getattr(obs, "on_lines", None)
            if callable(bulk):
                bulk(block)
                continue
            if lines is None:
                lines = [Line(block.rank, block.stream, t) for t in block.lines]
            for line in lines:
                obs.on_line(line)

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Mapping[int, int | None]) -> None:
        for obs in self.observers:
            obs.on_end(state, exit_code, rank_exit_codes)
