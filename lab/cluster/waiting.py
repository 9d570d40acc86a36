"""Stop before the start: a run whose hosts are still coming (a Slurm job in the queue) can
be stopped from its view, and ends as cancelled without having started.

While a hook waits for its hosts (lab.cluster.hooks, ``waiting``), the run's observers
hear each reason it waits together with a ``PendingControl``: the RunControl a view's Stop
button calls before the supervisor exists. The hook looks at ``PendingControl.stopped``
while it waits, withdraws what it asked for (the queued job is cancelled and has left the
queue) and raises lab.errors.StoppedWaiting. ``end_waiting`` then ends the run as a
stopped running run ends: a run directory whose manifest says ``cancelled`` and why (with
the hook's fields: how long it queued, squeue's reasons, no job), the observers'
``on_end``, and a RunResult with exit code 130.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lab.cluster import rundir
from lab.cluster.launchers.base import RunObserver
from lab.cluster.runstate import EXIT_CANCELLED, RunResult, RunState
from lab.errors import StoppedWaiting

log = logging.getLogger(__name__)


class PendingControl:
    """The RunControl of a run that has not started yet; thread-safe, returns at once."""

    def __init__(self) -> None:
        self.stopped = threading.Event()  # what the waiting hook looks at
        self.reason = ""

    def cancel(self, reason: str = "cancelled") -> None:
        """Ask the waiting run to end (the view's Stop while it is queued)."""
        if not self.stopped.is_set():
            self.reason = reason
            self.stopped.set()


def end_waiting(
    stopped: StoppedWaiting,
    control: PendingControl,
    run_dir: Path,
    manifest: Mapping[str, Any],
    observers: Sequence[RunObserver],
) -> RunResult:
    """End a run stopped before its start: its manifest (``manifest``: the fields it
    would have started with), its observers' end, its result."""
    ended = time.time()
    started = ended - stopped.waited
    reason = f"{control.reason or 'cancelled'} while {stopped.waiting}"
    result = RunResult(
        run_dir=run_dir,
        state=RunState.CANCELLED,
        exit_code=EXIT_CANCELLED,
        rank_exit_codes={},
        started=started,
        ended=ended,
        commands=(),
        reason=reason,
        run_id=run_dir.name,
    )
    rundir.write_manifest(
        run_dir,
        **manifest,
        run_id=run_dir.name,
        started=rundir.timestamp(started),
        processes=[],
        **rundir.end_fields(result, ()),
    )
    log.info("run %s: %s after %.1f s", run_dir.name, reason, stopped.waited)
    for obs in observers:
        try:
            obs.on_end(result.state.value, result.exit_code, {})
        except Exception:  # a view's trouble must not hide how the run ended
            log.exception("run view: on_end failed")
    return result


__all__ = ["PendingControl", "end_waiting"]
