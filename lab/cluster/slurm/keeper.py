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
until squeue no longer lists it, and exits. As in lab.cluster.emulation.keeper.
"""

from __future__ import annotations

import logging
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from lab.errors import LaunchError

log = logging.getLogger(__name__)
RELEASE = b"release\n"
READY = b"ready\n"
ROOT = Path(__file__).resolve().parents[3]  # the directory holding the ``lab`` package
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
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        proc = subprocess.Popen(
            [sys.executable, "-c", ENTRY, name, str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
            cwd="/", env=env, start_new_session=True,
        )  # fmt: skip
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else b""
        proc.stdout.close()
        if line != READY:
            proc.kill()
            proc.wait(5)
            raise LaunchError(
                f"the Slurm job's keeper did not start (exit code {proc.returncode}; its "
                "error is above): without it a killed lab would leave its job queued"
            )
        return cls(proc)

    def release(self, timeout: float = 5.0) -> None:
        """Tell the keeper that the lab ended the job itself, and wait for it to exit."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(RELEASE)
            self.proc.stdin.close()
        except OSError:
            pass  # it has exited already
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("keeper pid %d did not exit on release; killing it", self.proc.pid)
            self.proc.kill()
            self.proc.wait(timeout)


def watch(owner: int) -> str:
    """Block until the lab (``owner``, the parent) is gone or lets go; why, or "" after
    ``release``."""
    try:
        fd: int | None = os.pidfd_open(owner)
    except (AttributeError, OSError):
        fd = None
    if os.getppid() != owner:
        return f"lab pid {owner} is gone"
    os.write(1, READY)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # nothing more to say on stdout: let the lab close its end
    os.close(devnull)
    got = b""
    while True:
        fds = [0] + ([fd] if fd is not None else [])
        try:
            ready, _, _ = select.select(fds, [], [], None if fd is not None else POLL_S)
        except InterruptedError:
            continue
        if fd is not None and fd in ready:
            return f"lab pid {owner} exited"
        if 0 in ready:
            data = os.read(0, 64)
            got += data
            if RELEASE in got:
                return ""
            if not data:
                return f"lab pid {owner} ended, or closed its pipe, without a release"
        if fd is None and os.getppid() != owner:
            return f"lab pid {owner} is gone"


def main(argv: list[str]) -> int:
    from lab.cluster.slurm.allocation import cancel_by_name

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
    return 0


__all__ = ["JobKeeper"]
