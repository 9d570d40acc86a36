"""A rank on an emulated host waits for its host's CPU share before its first timed step.

Emulated hosts start at full speed and get their shares once the launcher has read the
job's first step record (lab.cluster.emulation.startup). That read can come late, and a
job does not stop for it: on a loaded 2-core CI machine a parameter-server job of a small
CNN (2 + 10 steps of some tens of ms each, all scheduled at once) ran three of its four
points to the end before its shares applied, so those runs measured nothing and the
notebook's fit failed. So a cluster whose hosts start at full speed names a mark file
(``DISTLAB_SHARES_MARK``) that the launcher creates once every share is in force, and the
lab's workloads, once they have printed a step record (which is what the launcher waits
for), wait for that mark before their first timed step. Elsewhere the variable is unset and
nothing waits. Stdlib only: the MXNet workload's venv imports it too.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from lab.metrics.records import emit

MARK_ENV = "DISTLAB_SHARES_MARK"
# Ten times the longest read lag seen (3.5 s, before start-up weights were lowered); past
# it the rank goes on, and lab.metrics.shares still treats what ran at full speed as warm-up.
WAIT_S = 30.0
POLL_S = 0.005


def shares_pending() -> bool:
    """Whether this process runs on an emulated host whose share has not applied yet."""
    path = os.environ.get(MARK_ENV)
    return bool(path) and not os.path.exists(path)  # type: ignore[arg-type]


def wait_for_shares(rank: int | None = None, timeout: float = WAIT_S, **fields: Any) -> float:
    """Block until the host's share is in force (at most ``timeout`` s); the seconds waited.

    Returns 0 at once where no mark is named (not an emulated host, or hosts that keep
    their share from the start). Otherwise an ``event`` record ``shares_wait`` says how
    long the rank waited (0: the mark was there already, e.g. for a replacement started
    mid-run) and whether the share applied (``fields`` are added to it).
    """
    path = os.environ.get(MARK_ENV)
    if not path:
        return 0.0
    began = time.monotonic()
    applied = True
    while not os.path.exists(path):
        if time.monotonic() - began > timeout:
            applied = False
            print(
                f"distlab: rank {rank}: the host's CPU share did not apply within "
                f"{timeout:.0f} s; timing steps anyway",
                file=sys.stderr,
                flush=True,
            )
            break
        time.sleep(POLL_S)
    waited = time.monotonic() - began
    emit("event", name="shares_wait", rank=rank, waited_s=round(waited, 6), applied=applied,
         **fields)  # fmt: skip
    return waited


def wait_before_step(step: int, warmup_steps: int, rank: int | None = None) -> None:
    """``wait_for_shares`` where a loop that prints each step's record as it ends reaches its
    first timed step, or step 1 when no step is warm-up: a step record is out by then."""
    if step == max(warmup_steps, 1):
        wait_for_shares(rank)


__all__ = ["MARK_ENV", "WAIT_S", "shares_pending", "wait_before_step", "wait_for_shares"]
