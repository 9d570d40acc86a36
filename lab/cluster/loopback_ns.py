"""A job on this machine alone runs in a private network namespace that has only ``lo``.

Some engines cannot be told an address and listen on every interface while a run lasts:
TensorFlow's gRPC servers (a parameter-server job's servers, workers and chief; a
MultiWorkerMirroredStrategy job's workers), ps-lite's scheduler and servers,
torch.distributed's store. A job whose hosts are all this machine needs none of the
machine's interfaces, so its processes share one namespace of its own whose only
interface is the loopback: "every interface" there is 127.0.0.1, and nothing of the job
can be reached from another host or another namespace. Two jobs get two namespaces, so
they never meet either.

The namespace has no name and no file: a holder process makes it (``unshare --net``, with
``--user --map-root-user`` when not root), brings ``lo`` up and waits on its stdin, a pipe
only the lab holds; each rank joins it (``nsenter --net=/proc/HOLDER/ns/net``). When the
lab ends the run, or dies by ``kill -9``, the pipe closes, the holder exits, and the
kernel frees the namespace with the last process in it: nothing is left to clean up.
Where namespaces cannot be made (no util-linux, user namespaces off), the job runs as
before, and the manifest and the log say so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

log = logging.getLogger(__name__)
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
# brings the loopback up, says so, then holds the namespace until stdin closes
HOLDER = "ip link set lo up && echo up && exec cat >/dev/null"


@dataclass(frozen=True)
class Namespace:
    """A private loopback namespace held by process ``holder``; ``user``: whether it sits
    in a user namespace of its own (made without root), which the ranks join too."""

    holder: int
    user: bool

    def enter_argv(self) -> list[str]:
        """The prefix that runs a command inside the namespace (nsenter execs it, so the
        command keeps the pid the caller started)."""
        argv = ["nsenter", f"--net=/proc/{self.holder}/ns/net"]
        if self.user:
            argv += [f"--user=/proc/{self.holder}/ns/user", "--preserve-credentials"]
        return [*argv, "--"]

    def describe(self) -> str:
        return "a private network namespace with only lo" + (
            " (in a user namespace)" if self.user else ""
        )


class Unavailable(RuntimeError):
    """No private namespace can be made here; says why."""


def _holder_argv() -> list[str]:
    for tool in ("unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            raise Unavailable(f"{tool!r} is not installed (Debian: util-linux, iproute2)")
    user = ["--user", "--map-root-user"] if os.geteuid() != 0 else []
    return ["unshare", *user, "--net", "--", "sh", "-c", HOLDER]


@contextlib.contextmanager
def private_loopback() -> Iterator[Namespace]:
    """A private loopback namespace for the block; Unavailable (before anything is left
    running) where none can be made."""
    argv = _holder_argv()
    holder = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a Ctrl-C to the lab's group ends the run, then this
    )
    try:
        _wait_up(holder)
        yield Namespace(holder=holder.pid, user=os.geteuid() != 0)
    finally:
        _stop(holder)


def _wait_up(holder: subprocess.Popen[bytes]) -> None:
    """Block until the holder says ``up``; Unavailable with its stderr otherwise."""
    assert holder.stdout is not None and holder.stderr is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([holder.stdout], [], [], 0.1)
        if ready:
            line = holder.stdout.readline()
            if line.strip() == b"up":
                return
            break  # EOF: the holder failed
        if holder.poll() is not None:
            break
    why = _stop(holder)
    raise Unavailable(why or f"the namespace's holder did not start in {START_TIMEOUT_S:g} s")


def _stop(holder: subprocess.Popen[bytes]) -> str:
    """Close the holder's stdin (it exits), kill it if it does not; what it said on
    stderr."""
    with contextlib.suppress(OSError):
        if holder.stdin is not None:
            holder.stdin.close()
    try:
        holder.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        holder.kill()
        holder.wait(timeout=STOP_TIMEOUT_S)
    said = b""
    with contextlib.suppress(OSError, ValueError):
        if holder.stderr is not None:
            said = holder.stderr.read()
    for stream in (holder.stdout, holder.stderr):
        with contextlib.suppress(OSError):
            if stream is not None:
                stream.close()
    return said.decode(errors="replace").strip()
