"""A rank's CPU profile over all its threads, for finding what a workload's own Python costs.

cProfile follows only the thread that enables it, and the parameter server's work happens
in sender and receiver threads. ``ThreadProfiles`` gives the calling thread and every
thread started after ``start()`` a profiler of its own (through ``threading.setprofile``:
a new thread's first event swaps the hook for a profiler), and ``dump`` merges them into
one pstats file. The timer is ``time.thread_time`` by default: CPU seconds of the thread,
so time spent blocked in a wait or waiting for a core on a busy machine is not counted.
"""

from __future__ import annotations

import cProfile
import pstats
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class ThreadProfiles:
    """One cProfile profiler per thread of this process, merged on ``dump``.

    Args:
        timer: the clock every profiler reads (CPU time of the thread by default; pass
            ``time.perf_counter`` for wall time).
    """

    def __init__(self, timer: Callable[[], float] = time.thread_time) -> None:
        self.timer = timer
        self.profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()
        self._main: cProfile.Profile | None = None

    def _new(self) -> cProfile.Profile:
        prof = cProfile.Profile(self.timer)
        with self._lock:
            self.profiles.append(prof)
        return prof

    def _first_event(self, _frame: Any, _event: str, _arg: Any) -> None:
        self._new().enable()  # replaces this hook for the thread that called it

    def start(self) -> None:
        """Profile the calling thread and every thread started from now on."""
        threading.setprofile(self._first_event)
        self._main = self._new()
        self._main.enable()

    def stop(self) -> None:
        """Stop profiling new threads and the calling thread (threads already running go on
        until they end; join them before ``dump``)."""
        threading.setprofile(None)  # type: ignore[arg-type]
        if self._main is not None:
            self._main.disable()

    def dump(self, path: str | Path) -> Path:
        """Write every thread's profile, merged, as one pstats file at ``path``."""
        self.stop()
        with self._lock:
            profiles = list(self.profiles)
        stats = pstats.Stats(profiles[0])
        for prof in profiles[1:]:
            stats.add(prof)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        stats.dump_stats(str(path))
        return path
