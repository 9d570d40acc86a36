"""The process that cancels a run's Slurm job when the lab that asked for it dies.

A job from ``salloc --no-shell`` outlives the process that asked for it: the lab cancels it
when a run ends, but a lab killed with ``kill -9`` (or by the OOM killer) runs no code, and
its job would hold the nodes until its time limit. So before it asks, the lab starts a
keeper for the job's name, in its own session (a signal to the lab's process group does
not reach it)::

    python -c "...keeper.main(sys.argv[1:])" NAME LAB_PID

The keeper watches two things: a pidfd of its parent, the lab, readable the moment it exits
however it dies, and its own stdin, a pipe only the lab writes. ``release`` on stdin means
the lab ended the job itself: the keeper exits. The lab's exit, or stdin's end without
``release``, means nobody else will: the keeper cancels every job of this user with that
name (``scancel --name``: a job still pending too, whose salloc then gives up), waits
until squeue no longer lists it, resumes the nodes a revocation of the job left DOWN
(their reason names the job: lab.cluster.slurm.revoke), and exits. The handshake is
lab.cluster.keeping's, as for emulated clusters.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time

from lab.cluster import keeping

log = logging.getLogger(__name__)
POLL_S = 0.2  # how often the lab is checked where the kernel has no pidfd
GONE_S = 10.0  # how long a cancelled job may take to leave the queue
ENTRY = "import sys; from lab.cluster.slurm.keeper import main; sys.exit(main(sys.argv[1:]))"


class JobKeeper:
    """The lab's handle on the keeper of one job name."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    @classmethod
    def start(cls, name: str, timeout: float = 30.0) -> JobKeeper:
        """Start the keeper of job ``name`` and wait until it watches (LaunchError if not:
        without it a killed lab would leave its job queued)."""
        proc = keeping.spawn(ENTRY, [name, str(os.getpid())])
        keeping.await_ready(proc, timeout, "the Slurm job's keeper", "its job queued")
        return cls(proc)

    def release(self, timeout: float = 5.0) -> None:
        """Tell the keeper that the lab ended the job itself, and wait for it to exit."""
        keeping.release(self.proc, timeout)


def watch(owner: int) -> str:
    """Block until the lab (``owner``, the parent) is gone or lets go; why, or "" after
    ``release``."""
    return keeping.watch(owner, lambda: os.getppid() == owner, "lab", POLL_S)


def main(argv: list[str]) -> int:
    from lab.cluster.slurm.allocation import cancel_by_name
    from lab.cluster.slurm.revoke import resume_left_down

    logging.raiseExceptions = False  # stderr may be a dead lab's pipe: never fail on it
    logging.basicConfig(
        format=f"%(asctime)s.%(msecs)03d [distlab slurm keeper {argv[0]}] %(message)s",
        datefmt="%H:%M:%S", level=logging.INFO,
    )  # fmt: skip
    name, owner = argv[0], int(argv[1])
    why = watch(owner)
    if not why:
        return 0
    began = time.monotonic()
    cancel_by_name(name, wait=GONE_S)
    log.info("%s: cancelled job %s in %.2f s", why, name, time.monotonic() - began)
    resumed = resume_left_down(name)
    if resumed:
        log.info("resumed %s, left DOWN by a revocation of job %s", ", ".join(resumed), name)
    return 0


__all__ = ["JobKeeper"]
