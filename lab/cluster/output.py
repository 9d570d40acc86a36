"""A run's output: bytes from every process's pipes become lines attributed to ranks (by the
launcher's ``demux``), appended to ``rank-<r>.log``, kept as a short tail per rank (and
of its stderr, and of the launcher's own lines per process) for failure reports, and handed
to the observers (the live view) through threads of their own. An observer with
``on_read(blocks)`` sees each read's blocks on the reader thread instead, first: for a
check as cheap as a substring search whose action cannot wait (the emulated hosts'
start-up gate).

The readers work a read at a time, not a line at a time: up to ``READ_BYTES`` land in a
reused buffer, the lines they complete stay one string (lab.cluster.lines), a launcher
that can attributes that block whole (``demux_block``), and each rank's share goes into
its log with one write and one flush. Every line that reaches a log is whole, each
rank's lines keep their order, and the log is flushed after every read, so a line is on
disk within one read of being printed. A stdout pipe is widened to ``PIPE_BYTES`` and,
where that worked, its reader waits ``GATHER_S`` after a short read: a rank printing fast
then fills the pipe with many lines per wake-up instead of waking the reader for each one
(which slowed such ranks several times over); a quiet rank's line is still read the
moment it comes.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from lab.cluster.feed import ObserverFeed
from lab.cluster.launchers.base import Launcher, Line, Lines, RunObserver, demux_each
from lab.cluster.lines import BlockSplitter, last_lines
from lab.cluster.processes import SAID_LINES, TAIL_LINES, Proc

log = logging.getLogger(__name__)

STDERR_LINES = 100  # of each rank's stderr, for the line that says why it failed
TRACEBACK = "Traceback (most recent call last)"

READ_BYTES = 256 * 1024  # one read at most, into each reader's own reused buffer
PIPE_BYTES = 1 << 20  # asked of the kernel for each stdout pipe (its default is 64 KiB)
GATHER_S = 0.002  # the pause after a short read
SHORT_READ = 64 * 1024


def widen_pipe(fd: int, size: int = PIPE_BYTES) -> int:
    """Let ``fd``'s pipe hold ``size`` bytes, so a rank printing fast seldom waits on it;
    where the kernel refuses (its per-user limit), the pipe stays as it was. Returns the
    pipe's size (0 if it cannot be told)."""
    try:
        if fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) < size:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)
        return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    except (OSError, AttributeError):
        return 0


class RunOutput:
    """Where a run's lines go; one reader thread per stream calls ``read``."""

    def __init__(
        self,
        run_dir: Path,
        launcher: Launcher,
        observers: Sequence[RunObserver],
        ranks: Iterable[int],
    ) -> None:
        self.run_dir = run_dir
        self.launcher = launcher
        self.observers = observers
        self.tails: dict[int, deque[str]] = {r: deque(maxlen=TAIL_LINES) for r in ranks}
        self.stderr: dict[int, deque[str]] = {}
        self.traceback_at: dict[int, float] = {}
        # the few observers that must act on a line the moment it is read (the start-up gate)
        # see every read there, so they need no lane of their own as well
        self._on_read = [o for o in observers if callable(getattr(o, "on_read", None))]
        self.feed = ObserverFeed([o for o in observers if o not in self._on_read], self.notify)
        self._logs: dict[int | None, tuple[IO[str], threading.Lock]] = {}
        self._lock = threading.Lock()
        self._warned: set[str] = set()

    def read(self, proc: Proc, stream: str, pipe: IO[bytes] | None) -> None:
        """Drain one pipe to its end (``\\n`` and ``\\r`` both end a line)."""
        assert pipe is not None
        fd = pipe.fileno()
        # pause after short reads only where the pipe holds what comes meanwhile
        gather = GATHER_S if stream == "stdout" and widen_pipe(fd) >= PIPE_BYTES else 0.0
        splitter = BlockSplitter()
        buf = bytearray(READ_BYTES)
        view = memoryview(buf)
        try:
            while True:
                try:
                    n = os.readv(fd, [buf])
                except OSError:
                    n = 0
                block = splitter.feed(view[:n], final=not n)
                if block:
                    self.take(proc, stream, block)
                if not n:
                    break
                if n < SHORT_READ and gather:
                    time.sleep(gather)
        finally:
            pipe.close()

    def take(self, proc: Proc, stream: str, text: str) -> None:
        """One read's complete lines: into the logs and tails, then queued for the observers."""
        blocks = self.attribute(proc, stream, text)
        for obs in self._on_read:
            self.notify(obs, "on_read", blocks)
        for block in blocks:
            last = last_lines(block.text, TAIL_LINES)
            proc.tail.extend(last)
            if block.rank is None:
                proc.said.extend(last_lines(block.text, SAID_LINES))
            else:
                tail = self.tails.get(block.rank)
                if tail is None:
                    with self._lock:
                        tail = self.tails.setdefault(block.rank, deque(maxlen=TAIL_LINES))
                tail.extend(last)
                if block.stream == "stderr":
                    self._stderr(block.rank, block.text)
            f, lock = self.log(block.rank)
            with lock:
                f.write(block.text)
                f.flush()
        self.feed.put(blocks)

    def attribute(self, proc: Proc, stream: str, text: str) -> list[Lines]:
        """The block's lines by rank, in order: the launcher's ``demux_block`` where it has
        one, else its ``demux`` line by line."""
        whole = getattr(self.launcher, "demux_block", None)
        if whole is not None:
            try:
                return list(whole(proc.spec, stream, text))
            except Exception:
                self.warn_once("demux_block", "launcher %s could not read a block", self.launcher)
        return demux_each(lambda raw: self.demux(proc, stream, raw), text)

    def demux(self, proc: Proc, stream: str, text: str) -> Line:
        try:
            return self.launcher.demux(proc.spec, stream, text)
        except Exception:
            self.warn_once("demux", "launcher %s could not attribute a line", self.launcher)
            return Line(None, stream, text)

    def _stderr(self, rank: int, text: str) -> None:
        """Keep a rank's stderr apart (its error line is read from it) and when it first
        printed a Python traceback (the rank to blame when a launcher names none)."""
        tail = self.stderr.get(rank)
        if tail is None:
            with self._lock:
                tail = self.stderr.setdefault(rank, deque(maxlen=STDERR_LINES))
        tail.extend(last_lines(text, STDERR_LINES))
        if rank not in self.traceback_at and TRACEBACK in text:
            self.traceback_at.setdefault(rank, time.time())

    def log(self, rank: int | None) -> tuple[IO[str], threading.Lock]:
        """The open log of ``rank`` (``launcher.log`` for lines no rank can be named for)."""
        entry = self._logs.get(rank)
        if entry is None:
            with self._lock:
                entry = self._logs.get(rank)
                if entry is None:
                    name = "launcher.log" if rank is None else f"rank-{rank}.log"
                    f = open(  # noqa: SIM115  (closed in close())
                        self.run_dir / name, "a", encoding="utf-8", errors="replace"
                    )
                    entry = self._logs[rank] = (f, threading.Lock())
        return entry

    def close(self) -> None:
        """Deliver the observers' last lines, then close the logs."""
        if not self.feed.close():
            log.warning("run observers still busy after the run ended; later lines not shown")
        with self._lock:
            for f, _ in self._logs.values():
                f.close()

    def notify(self, obs: RunObserver, method: str, *args: Any) -> None:
        """Tell one observer; an observer's error is logged once, never stops the run."""
        try:
            getattr(obs, method)(*args)
        except Exception:
            self.warn_once(f"{id(obs)}.{method}", "observer %r failed in %s", obs, method)

    def warn_once(self, key: str, msg: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(msg, *args, exc_info=True)
