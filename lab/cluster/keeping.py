"""What a keeper process and the lab that starts it share: a keeper outlives a ``kill -9`` of
the lab and then undoes what the lab left (an emulated cluster, a Slurm job).

The lab starts it in its own session with a pipe on each side; the keeper says ``ready`` once
it watches the lab (a pidfd where the kernel has one, else polling), and exits quietly when the
lab writes ``release`` (the lab cleaned up itself). Anything else that ends the watch — the
lab's exit, or its end of the pipe closing — means the keeper does the cleaning.
"""

from __future__ import annotations

import logging
import os
import select
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from lab.errors import LaunchError

log = logging.getLogger(__name__)
RELEASE = b"release\n"
READY = b"ready\n"
ROOT = Path(__file__).resolve().parents[2]  # the directory holding the ``lab`` package


def spawn(entry: str, args: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start ``python -c entry args...`` in its own session, from ``/``, with ``lab``
    importable and both pipes open (the lab's stderr is kept: a keeper's error shows)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.Popen(
        [sys.executable, "-c", entry, *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
        cwd="/", env=env, start_new_session=True,
    )  # fmt: skip


def await_ready(proc: subprocess.Popen[bytes], timeout: float, what: str, left: str) -> None:
    """Wait until the keeper watches; LaunchError naming ``what`` keeps what and what a
    killed lab would then leave (``left``) when it does not say so in ``timeout`` s."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else b""
    proc.stdout.close()
    if line != READY:
        proc.kill()
        proc.wait(5)
        raise LaunchError(
            f"{what} did not start (exit code {proc.returncode}; its error is above): "
            f"without it a killed lab would leave {left}"
        )


def release(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """Tell the keeper that the lab cleaned up itself, and wait for it to exit."""
    try:
        assert proc.stdin is not None
        proc.stdin.write(RELEASE)
        proc.stdin.close()
    except OSError:
        pass  # it has exited already
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        log.warning("keeper pid %d did not exit on release; killing it", proc.pid)
        proc.kill()
        proc.wait(timeout)
    if proc.stdout is not None and not proc.stdout.closed:
        proc.stdout.close()


def pidfd(pid: int) -> int | None:
    """A pidfd of ``pid`` (readable once it exits), or None where the kernel has none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def watch(owner: int, alive: Callable[[], bool], who: str, poll_s: float) -> str:
    """In the keeper: say ``ready``, then block until the owner (pid ``owner``, called
    ``who`` in the answer) is gone or lets go; why, or "" after a ``release``. ``alive``
    tells whether the owner still runs where no pidfd can (the pid may be reused)."""
    fd = pidfd(owner)
    if not alive():
        return f"{who} pid {owner} is gone"
    os.write(1, READY)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # nothing more to say on stdout: let the lab close its end
    os.close(devnull)
    got = b""
    while True:
        fds = [0] + ([fd] if fd is not None else [])
        try:
            ready, _, _ = select.select(fds, [], [], None if fd is not None else poll_s)
        except InterruptedError:
            continue
        if fd is not None and fd in ready:
            return f"{who} pid {owner} exited"
        if 0 in ready:
            data = os.read(0, 64)
            got += data
            if RELEASE in got:
                return ""
            if not data:
                return f"{who} pid {owner} ended, or closed its pipe, without a release"
        if fd is None and not alive():
            return f"{who} pid {owner} is gone"
