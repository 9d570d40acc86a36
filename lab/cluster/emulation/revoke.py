"""What a revocation does to an emulated host, in the kernel: its link goes down, every
process in it is killed, and later the link comes back or another host takes its address.

These act on objects that lab.cluster.emulation.prepare made (and will remove): nothing
here creates a namespace or cgroup, so a revoked host leaves nothing behind that the
cluster's teardown does not already remove.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

from lab.cluster.emulation import netns
from lab.errors import LaunchError

log = logging.getLogger(__name__)


def set_link(veth: str, up: bool) -> None:
    """Bring the host's end of its veth pair (on the bridge) down or up; its shaping stays."""
    netns.run(["ip", "link", "set", "dev", veth, "up" if up else "down"])


def _cgroup_pids(group: str) -> list[int]:
    try:
        return [int(p) for p in (Path(group) / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def kill_host(group: str, namespace: str, timeout: float = 10.0) -> int:
    """SIGKILL every process in the host's cgroup and network namespace until none is left;
    how many were killed. The cgroup and namespace themselves stay (a replacement reuses
    them; the cluster's teardown removes them)."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        pids = set(_cgroup_pids(group)) | set(netns.netns_pids(namespace))
        pids.discard(os.getpid())
        if not pids:
            return len(killed)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        if time.monotonic() > deadline:
            raise LaunchError(f"processes {sorted(pids)} outlived the revocation of {namespace}")
        time.sleep(0.05)


def take_address(namespace: str, address: str, prefix: int, others: Iterable[str]) -> None:
    """Give ``namespace``'s interface ``address`` as well (a spare taking over a revoked
    host's address, as a cloud moves an IP), and drop the old owner's MAC from the other
    hosts' neighbour caches so that they ask again at once."""
    netns.run(["ip", "-n", namespace, "addr", "add", f"{address}/{prefix}",
               "dev", netns.HOST_IFNAME])  # fmt: skip
    for other in others:
        netns.run(["ip", "-n", other, "neigh", "flush", "to", address], check=False)
    netns.run(["ip", "neigh", "flush", "to", address], check=False)
