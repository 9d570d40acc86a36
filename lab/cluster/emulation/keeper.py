"""The process that removes an emulated cluster when the lab that made it dies.

An emulated cluster is kernel objects (namespaces, veths, a bridge, cgroups) and, with
``sshd``, root sshds that accept keys and any environment. The lab removes them when a run
ends, but a lab killed with ``kill -9`` (or by the OOM killer) runs no code. So
``prepare`` starts a keeper for each cluster, in its own session (a signal to the lab's
process group does not reach it), right after the cluster's record is written and before
any object exists::

    python -c "...keeper.main(sys.argv[1:])" TAG

The keeper reads the record (lab.cluster.emulation.state) for its owner, the lab's process,
and watches two things: a pidfd of that process, readable the moment it exits however it
dies, and its own stdin, a pipe only the lab writes. ``release`` on stdin means the lab
removed the cluster itself: the keeper exits. The owner's exit, or stdin's end without
``release``, means nobody else will: the keeper kills the commands the lab left working
on the cluster (an ``ip netns add`` in flight would make a namespace after the removal),
removes everything the record names (the processes in the hosts' namespaces and cgroups
first, sshds among them) and exits. It takes no lock: other labs leave a cluster whose
keeper lives to it (``cleanup_stale``), so its removal never waits behind another lab's
start-up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import time
from pathlib import Path

from lab.cluster import keeping
from lab.cluster.emulation import removal, state
from lab.errors import LaunchError
from lab.metrics import liveness

log = logging.getLogger(__name__)
# The keeper's nice value. It idles in select() and then uses a fraction of a second of CPU
# (its start-up, then the removal's `ip` calls), but on a machine with 10-20 runnable
# processes per core that fraction took over 5 s at the default priority (0).
PRIORITY = -10
POLL_S = 0.1  # how often the owner is checked where the kernel has no pidfd
# -c rather than -m: the package imports this module first, and runpy warns of the twin
ENTRY = "import sys; from lab.cluster.emulation.keeper import main; sys.exit(main(sys.argv[1:]))"


class Keeper:
    """The lab's handle on a cluster's keeper process."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    @classmethod
    def start(cls, rec: state.Record) -> Keeper:
        """Start the keeper of ``rec``'s cluster and note its pid in the record (so that
        other labs leave the cluster to it). It watches once it says ``ready``
        (``confirm``); an owner that died before is found by its start time."""
        proc = keeping.spawn(ENTRY, [rec.tag])
        _raise_priority(proc.pid)
        rec.keeper_pid = proc.pid
        rec.keeper_start_time = liveness.start_time(proc.pid)
        rec.save()
        return cls(proc)

    def confirm(self, timeout: float = 30.0) -> None:
        """Wait until the keeper watches the owner; LaunchError when it does not."""
        keeping.await_ready(
            self.proc, timeout, "the emulated cluster's keeper", "the cluster behind"
        )

    def release(self, timeout: float = 5.0) -> None:
        """Tell the keeper that the lab removed the cluster itself, and wait for it to exit."""
        keeping.release(self.proc, timeout)


def _raise_priority(pid: int) -> None:
    """Give the keeper ``PRIORITY``, and its session's autogroup too: where the kernel
    groups tasks by session (sched_autogroup_enabled) a task's nice value counts only within
    its own session, and the keeper's session holds nothing else. Best effort (not root:
    it then starts as fast as the machine lets it)."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, pid, PRIORITY)
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(str(PRIORITY))


def watch(rec: state.Record) -> str:
    """Block until the owner is gone or lets go; why, or "" after ``release``."""
    return keeping.watch(rec.pid, rec.owner_alive, "owner", POLL_S)


def main(argv: list[str]) -> int:
    logging.raiseExceptions = False  # stderr may be a dead lab's pipe: never fail on it
    logging.basicConfig(
        format=f"%(asctime)s.%(msecs)03d [distlab keeper {argv[0]}] %(message)s",
        datefmt="%H:%M:%S", level=logging.INFO,
    )  # fmt: skip
    path = state.state_dir() / f"{argv[0]}.json"
    rec = _load(path)
    if rec is None:
        return 1
    why = watch(rec)
    if not why:
        return 0
    began = time.monotonic()
    log.info("%s: removing the emulated cluster", why)
    rec = _load(path)  # the owner may have removed part, or all of it, meanwhile
    if rec is None:
        return 0
    if not rec.names_are_ours():
        log.error("record %s names objects without its tag; not touching them", path)
        return 1
    try:
        removal.end_commands(rec)
        removal.remove(rec)
    except LaunchError as e:
        log.error("%s", e)  # the record stays: the next start retries
        return 1
    log.info("%s: removed emulated cluster %s in %.2f s", why, rec.tag, time.monotonic() - began)
    return 0


def _load(path: Path) -> state.Record | None:
    for rec in state.records():
        if rec.path == path:
            return rec
    return None
