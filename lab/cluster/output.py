"""A run's output: bytes from every process's pipes become lines attributed to ranks (by the
launcher's ``demux``), appended to ``rank-<r>.log`` (flushed per line), kept as a short tail
per rank for failure reports, and handed to the observers (the live view)."""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from lab.cluster.launchers.base import Launcher, Line, RunObserver
from lab.cluster.lines import LineSplitter
from lab.cluster.processes import TAIL_LINES, Proc

log = logging.getLogger(__name__)


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
        self._logs: dict[int | None, tuple[IO[str], threading.Lock]] = {}
        self._lock = threading.Lock()
        self._warned: set[str] = set()

    def read(self, proc: Proc, stream: str, pipe: IO[bytes] | None) -> None:
        """Drain one pipe to its end, line by line (``\\n`` and ``\\r`` both end a line)."""
        assert pipe is not None
        splitter = LineSplitter()
        fd = pipe.fileno()
        try:
            while True:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    data = b""
                for text in splitter.feed(data, final=not data):
                    self.line(proc, stream, text)
                if not data:
                    break
        finally:
            pipe.close()

    def line(self, proc: Proc, stream: str, text: str) -> None:
        try:
            line = self.launcher.demux(proc.spec, stream, text)
        except Exception:
            self.warn_once("demux", "launcher %s could not attribute a line", self.launcher)
            line = Line(None, stream, text)
        proc.tail.append(line.text)
        if line.rank is not None:
            tail = self.tails.get(line.rank)
            if tail is None:
                with self._lock:
                    tail = self.tails.setdefault(line.rank, deque(maxlen=TAIL_LINES))
            tail.append(line.text)
        f, lock = self.log(line.rank)
        with lock:
            f.write(line.text + "\n")
        for obs in self.observers:
            self.notify(obs, "on_line", line)

    def log(self, rank: int | None) -> tuple[IO[str], threading.Lock]:
        """The open log of ``rank`` (``launcher.log`` for lines no rank can be named for)."""
        entry = self._logs.get(rank)
        if entry is None:
            with self._lock:
                entry = self._logs.get(rank)
                if entry is None:
                    name = "launcher.log" if rank is None else f"rank-{rank}.log"
                    f = open(  # noqa: SIM115  (closed in close())
                        self.run_dir / name, "a", buffering=1, encoding="utf-8", errors="replace"
                    )
                    entry = self._logs[rank] = (f, threading.Lock())
        return entry

    def close(self) -> None:
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
