"""A run's observers (the live view, tees, fault injectors) are fed from threads of their
own, so a pipe reader only ever splits, writes and queues (DESIGN.md, contract 5); the
one exception, the emulated hosts' start-up gate, checks each read on the reader thread
(RunOutput's ``on_read``).

Readers queue each read's lines as blocks (lab.cluster.launchers.base.Lines); each
observer has its own lane — a bounded queue and a thread — that hands the blocks on in
the order they were queued, so each rank's and stream's lines keep their order. One
lane each, because observers that act on a record (a fault injector revoking a host at
step N) must not wait behind one that draws.
The queues are bounded: an observer far behind makes the readers wait (the ranks then
wait on their pipes) rather than memory grow or a line be dropped.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from lab.cluster.launchers.base import Line, Lines, RunObserver

MAX_QUEUED = 64  # reads' worth of blocks per observer (each at most one read buffer of text)


class _Lane:
    """One observer's queue and the thread that empties it into the observer."""

    def __init__(self, obs: Any, notify: Callable[..., None], max_queued: int) -> None:
        self.obs, self._notify = obs, notify
        self.bulk = callable(getattr(obs, "on_lines", None))
        self.queue: queue.Queue[list[Lines] | None] = queue.Queue(maxsize=max_queued)
        self.delivered = 0  # blocks handed on so far
        self.sent_end = False
        self.thread = threading.Thread(target=self._run, name="lab-observers", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            blocks = self.queue.get()
            if blocks is None:
                return
            for block in blocks:
                self.deliver(block)
                self.delivered += 1

    def deliver(self, block: Lines) -> None:
        if self.bulk:
            self._notify(self.obs, "on_lines", block)
            return
        rank, stream = block.rank, block.stream
        for text in block.lines:
            self._notify(self.obs, "on_line", Line(rank, stream, text))


class ObserverFeed:
    """Hands blocks of lines to each of ``observers`` from a thread of its own, the threads
    started on the first block.

    Args:
        observers: told of every line, by ``on_lines(block)`` where they have it, else
            ``on_line(line)`` for each line.
        notify: ``notify(observer, method, *args)`` calls one observer and keeps its
            errors from ending the run (RunOutput.notify).
    """

    def __init__(
        self,
        observers: Sequence[RunObserver],
        notify: Callable[..., None],
        max_queued: int = MAX_QUEUED,
    ) -> None:
        self._observers = list(observers)
        self._notify = notify
        self._max_queued = max_queued
        self._lanes: list[_Lane] | None = None
        self._lock = threading.Lock()
        self.closed = False
        self._abandoned = False  # close() gave up on a stuck observer

    @property
    def delivered(self) -> int:
        """Blocks handed on so far, summed over the observers."""
        return sum(lane.delivered for lane in self._lanes or ())

    def put(self, blocks: list[Lines]) -> None:
        """Queue one read's blocks for every observer (from a reader thread); waits only
        while an observer's queue is full."""
        if not self._observers or not blocks or self.closed:
            return
        if self._lanes is None:
            with self._lock:
                if self._lanes is None:
                    self._lanes = [
                        _Lane(o, self._notify, self._max_queued) for o in self._observers
                    ]
        for lane in self._lanes:
            while True:
                try:
                    lane.queue.put(blocks, timeout=0.5)
                    break
                except queue.Full:
                    if self.closed and (self._abandoned or not lane.thread.is_alive()):
                        break  # the run has ended and this observer with it

    def close(self, stall: float = 5.0) -> bool:
        """Deliver everything queued, then end the threads. Waits as long as the observers
        make progress; False if they made none for ``stall`` seconds (an observer that
        blocks), in which case later blocks are no longer queued."""
        self.closed = True
        lanes = self._lanes or []
        seen, since = -1, time.monotonic()
        while any(lane.thread.is_alive() for lane in lanes):
            if self.delivered != seen:
                seen, since = self.delivered, time.monotonic()
            elif time.monotonic() - since > stall:
                self._abandoned = True
                return False
            for lane in lanes:
                if not lane.sent_end:
                    try:
                        lane.queue.put(None, timeout=0.05)
                        lane.sent_end = True
                    except queue.Full:
                        continue
            for lane in lanes:
                lane.thread.join(0.2 / len(lanes))
        return True
