"""Ending a run's processes, staged: close every guard's stdin and SIGTERM it, wait one
shared deadline, then SIGKILL the guards and every descendant still alive.

Kept apart from the supervisor's watch loop so that how processes are ended can be read
(and changed) in one place: the grace a rank gets, the extra wait for remote guards (their
SIGTERM travels over ssh and the remote guard has its own grace), and the SIGKILL of
grandchildren that a dead guard can no longer end (the ProcessTracker's snapshots).
"""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from collections.abc import Sequence

from lab.cluster.processes import Proc, ProcessTracker
from lab.cluster.runstate import exit_status

log = logging.getLogger(__name__)


def reap(procs: Sequence[Proc]) -> None:
    """Note the exit code (or signal) and end time of every process that has exited."""
    for p in procs:
        if p.code is None and p.popen is not None and p.popen.poll() is not None:
            p.ended = time.time()
            p.code, p.signal = exit_status(p.popen.returncode)


def terminate(procs: Sequence[Proc], tracker: ProcessTracker, grace: float) -> None:
    """End every process still running: SIGTERM (and EOF on the guard's stdin), one
    deadline for all, then ``kill_all``."""
    reap(procs)
    alive = [p for p in procs if p.popen is not None and p.code is None]
    if not alive:
        return
    tracker.snapshot(procs)
    for p in alive:
        assert p.popen is not None
        try:
            if p.popen.stdin is not None:
                p.popen.stdin.close()
            p.popen.send_signal(signal.SIGTERM)
        except OSError:
            pass
    # One deadline for all: the guards' grace, plus the ssh round trip for remote ones.
    extra = grace + 4.0 if any(p.remote for p in alive) else 0.0
    deadline = time.monotonic() + grace + 2.0 + extra
    while time.monotonic() < deadline:
        reap(procs)
        if all(p.code is not None for p in alive):
            return
        time.sleep(0.05)
    kill_all(procs, tracker)


def kill_all(procs: Sequence[Proc], tracker: ProcessTracker) -> None:
    """SIGKILL every process still running and every descendant ever seen under them."""
    tracker.snapshot(procs)
    for p in procs:
        if p.popen is not None and p.code is None:
            log.warning("pid %d outlived the grace period; SIGKILL", p.popen.pid)
            p.popen.kill()
    kill_leftovers(tracker)
    for p in procs:
        if p.popen is not None and p.code is None:
            try:
                p.popen.wait(5)
            except subprocess.TimeoutExpired:
                log.error("pid %d did not end after SIGKILL", p.popen.pid)
    reap(procs)


def kill_leftovers(tracker: ProcessTracker, run_id: str = "") -> None:
    """SIGKILL the tracked descendants still alive (a rank's orphaned children)."""
    killed = tracker.kill_leftovers()
    if killed:
        log.warning("killed %d leftover process(es) of run %s", killed, run_id or "?")
