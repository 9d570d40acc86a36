"""A warm standby: a rank process that loads its engine, then waits to be needed.

lab.cluster.faults starts such a copy of a process on a spare host with
``DISTLAB_STANDBY=<file>``; the workload calls ``wait_if_standby`` before it starts its
work, so that once the file exists (the revoked host's address has moved to the spare) it
serves at once, with the import of its engine already paid for.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

STANDBY_ENV = "DISTLAB_STANDBY"
POLL_SECONDS = 0.05


def wait_if_standby(preload: Callable[[], Any], timeout: float) -> None:
    """With ``DISTLAB_STANDBY`` set: run ``preload``, then block until its file exists.

    Exits with code 3 if it is not needed within ``timeout`` seconds.
    """
    path = os.environ.get(STANDBY_ENV)
    if not path:
        return
    preload()
    print(f"standby: ready, waiting for {path}", file=sys.stderr, flush=True)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            print(f"standby: not needed within {timeout:.0f} s", file=sys.stderr, flush=True)
            sys.exit(3)
        time.sleep(POLL_SECONDS)
    print("standby: promoted", file=sys.stderr, flush=True)
