"""A run's observers (the live view, tees, fault injectors) are fed from one thread of
their own, so a pipe reader only ever splits, writes and queues (DESIGN.md, contract 5).

Readers queue each read's lines as blocks (lab.cluster.launchers.base.Lines); the feed
thread hands them on in the order they were queued, so each rank's and stream's lines
keep their order. The queue is bounded: an observer far behind makes the readers wait
(the ranks then wait on their pipes) rather than memory grow or a line be dropped.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from lab.cluster.launchers.base import Line, Lines, RunObserver

MAX_QUEUED = 64  # reads' worth of blocks (each at most one read buffer of text)


class ObserverFeed:
    """Hands blocks of lines to ``observers`` from one thread, started on the first block.

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
        self._observers = [(o, callable(getattr(o, "on_lines", None))) for o in observers]
        self._notify = notify
        self._queue: queue.Queue[list[Lines] | None] = queue.Queue(maxsize=max_queued)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.closed = False
        self.delivered = 0  # blocks handed on so far
        self._sent_end = False
        self._abandoned = False  # close() gave up on a stuck observer

    def put(self, blocks: list[Lines]) -> None:
        """Queue one read's blocks (from a reader thread); waits only while the queue is full."""
        if not self._observers or not blocks or self.closed:
            return
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="lab-observers", daemon=True
                    )
                    self._thread.start()
        while True:
            try:
                self._queue.put(blocks, timeout=0.5)
                return
            except queue.Full:
                if self.closed and (self._abandoned or not self._thread.is_alive()):
                    return  # the run has ended and its observers with it

    def close(self, stall: float = 5.0) -> bool:
        """Deliver everything queued, then end the thread. Waits as long as the observers
        make progress; False if they made none for ``stall`` seconds (an observer that
        blocks), in which case later blocks are no longer queued."""
        self.closed = True
        thread = self._thread
        if thread is None:
            return True
        seen, since = -1, time.monotonic()
        while thread.is_alive():
            if self.delivered != seen:
                seen, since = self.delivered, time.monotonic()
            elif time.monotonic() - since > stall:
                self._abandoned = True
                return False
            if not self._sent_end:
                try:
                    self._queue.put(None, timeout=0.2)
                    self._sent_end = True
                except queue.Full:
                    continue
            thread.join(0.2)
        return True

    def _run(self) -> None:
        while True:
            blocks = self._queue.get()
            if blocks is None:
                return
            for block in blocks:
                for obs, bulk in self._observers:
                    self.deliver(obs, bulk, block)
                self.delivered += 1

    def deliver(self, obs: Any, bulk: bool, block: Lines) -> None:
        if bulk:
            self._notify(obs, "on_lines", block)
            return
        rank, stream = block.rank, block.stream
        for text in block.lines:
            self._notify(obs, "on_line", Line(rank, stream, text))
