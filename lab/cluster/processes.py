"""The processes of a run as the supervisor knows them, and the tracking of their
descendants so that none escapes the final SIGKILL (a rank's grandchildren included)."""

from __future__ import annotations

import logging
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from lab.cluster.launchers.base import ProcessSpec
from lab.errors import RankFailure

log = logging.getLogger(__name__)

TAIL_LINES = 50  # kept per rank while running


class Proc:
    """One started process and what the supervisor knows about it."""

    def __init__(self, spec: ProcessSpec, argv: list[str], env: dict[str, str], cwd: str | None):
        self.spec, self.argv, self.env, self.cwd = spec, argv, env, cwd
        self.remote = not (spec.host.is_local or spec.host.namespace is not None)
        self.popen: subprocess.Popen[bytes] | None = None
        self.started: float | None = None
        self.ended: float | None = None
        self.code: int | None = None
        self.signal: str | None = None
        self.rank_pid: int | None = None
        self.revoked = False  # ended on purpose by a fault plan: its exit fails nothing
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.readers: list[threading.Thread] = []


def rank_of(p: Proc) -> int:
    """The rank a process answers for in reports (-1 for rank-less processes, e.g. a PS)."""
    return p.spec.ranks[0] if p.spec.ranks else -1


def failures_of(
    procs: Iterable[Proc],
    tail_of: Callable[[Proc], Iterable[str]],
    lines: int,
    default_end: float,
) -> tuple[RankFailure, ...]:
    """Every failed (not revoked) process as a RankFailure, the earliest first: the root
    cause of a failed run leads its report."""
    failed = [p for p in procs if p.code not in (None, 0) and not getattr(p, "revoked", False)]
    found = (
        RankFailure(
            rank=rank_of(p),
            host=p.spec.host.name,
            pid=p.rank_pid,
            exit_code=p.code,
            signal=p.signal,
            tail=tuple(tail_of(p))[-lines:],
            ended_at=p.ended or default_end,
        )
        for p in failed
    )
    return tuple(sorted(found, key=lambda f: (f.ended_at, f.rank)))


class ProcessTracker:
    """Every descendant ever seen under a run's guards, keyed by (pid, start time) so a
    reused pid is never mistaken for one of ours."""

    def __init__(self) -> None:
        self._tracked: dict[tuple[int, float], Any] = {}
        self._warned = False

    def snapshot(self, procs: Iterable[Proc]) -> None:
        """Record the live descendants of every running guard; learn each rank's pid.

        Walks down from each guard through /proc/PID/task/*/children (a few reads per
        run, where listing every process on a shared machine costs tens of ms).
        """
        try:
            import psutil
        except ImportError:
            if not self._warned:
                self._warned = True
                log.warning("psutil is missing; relying on the guards alone")
            return
        from lab.cluster.guard import descendants

        for p in procs:
            if p.popen is None or p.code is not None:
                continue
            found = descendants(p.popen.pid)  # the guard's own children come first
            if p.rank_pid is None and found and not p.remote:
                p.rank_pid = found[0]
            for pid in found:
                try:
                    pr = psutil.Process(pid)
                    self._tracked.setdefault((pid, pr.create_time()), pr)
                except psutil.Error:
                    continue

    def kill_leftovers(self) -> int:
        """SIGKILL every tracked process still alive; return how many there were."""
        try:
            import psutil
        except ImportError:
            return 0
        alive = []
        for pr in self._tracked.values():
            try:
                if pr.is_running() and pr.status() != psutil.STATUS_ZOMBIE:
                    pr.kill()
                    alive.append(pr)
            except psutil.Error:
                pass
        if alive:
            psutil.wait_procs(alive, timeout=3)
        return len(alive)
