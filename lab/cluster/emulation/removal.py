"""Removing an emulated cluster's objects, from its record alone.

Kept apart from lab.cluster.emulation.lifecycle, which makes clusters, so that the keeper
(lab.cluster.emulation.keeper), which has only the record of a cluster some other process
made, removes it exactly as the lab does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import time
from pathlib import Path

from lab.cluster.emulation import cgroups, netns, state
from lab.errors import LaunchError

log = logging.getLogger(__name__)
SLOW_S = 1.0  # a step slower than this is said (the kernel's rtnl lock, a busy machine)


def remove(rec: state.Record) -> None:
    """Remove every object ``rec`` names (absent ones are fine), then the record itself.

    Processes go first: whatever runs in the hosts' namespaces or cgroups (ranks, sshds
    and their sessions) is killed, then the cgroups, veths, bridge and namespaces are
    deleted, then the cluster's files.

    Raises:
        LaunchError: something could not be removed; the record stays so that the next
            start retries.
    """
    errors: list[str] = []
    began = time.monotonic()
    existing = set(netns.list_netns())
    for ns in rec.netns:
        if ns in existing:
            for pid in netns.netns_pids(ns):
                log.warning("ending pid %d left in namespace %s", pid, ns)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    if time.monotonic() - began > SLOW_S:
        log.warning("finding the namespaces' processes took %.1f s", time.monotonic() - began)
    driver = cgroups.CgroupDriver(rec.cgroup_version, Path("/"))
    steps = [
        *((driver.remove, Path(g)) for g in rec.cgroups),
        *((netns.delete_link, link) for link in rec.links),
        (netns.delete_link, rec.bridge),
        *((netns.delete_netns, ns) for ns in rec.netns if ns in existing),
        *([(_remove_files, rec.files)] if rec.files else []),
    ]
    for fn, arg in steps:
        began = time.monotonic()
        try:
            fn(arg)
        except (OSError, LaunchError) as e:
            errors.append(f"{arg}: {e}")
        if time.monotonic() - began > SLOW_S:
            log.warning("removing %s took %.1f s", arg, time.monotonic() - began)
    if errors:
        raise LaunchError(
            f"emulated cluster {rec.tag} was not fully removed ({'; '.join(errors)}); "
            f"its record {rec.path} stays so that the next start retries"
        )
    rec.drop()
    log.info("emulated cluster %s removed", rec.tag)


def end_commands(rec: state.Record, wait: float = 3.0) -> list[int]:
    """Kill the commands still making ``rec``'s objects, and wait (up to ``wait`` s) until
    they are gone; their pids.

    A lab killed while it builds a cluster leaves its ``ip``, ``tc`` or ``ssh-keygen``
    child running: one that finished after the removal would make a namespace, link or
    key file nobody removes. Each names an object of the cluster in its arguments (the
    lab's object names carry the cluster's unique tag), which is how they are found.
    """
    names = [rec.bridge, *rec.links, *rec.netns, state.cgroup_dir(rec.tag), rec.files]
    marks = [n.encode() for n in names if n]
    found = [pid for pid in _pids() if any(m in _cmdline(pid) for m in marks)]
    for pid in found:
        log.warning("ending pid %d, a command on the cluster's objects", pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait
    while any(_cmdline(pid) for pid in found) and time.monotonic() < deadline:
        time.sleep(0.02)  # a command in the middle of a kernel call ends when it returns
    return found


def _pids() -> list[int]:
    me = os.getpid()
    return [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) != me]


def _cmdline(pid: int) -> bytes:
    """``pid``'s arguments; empty once it has ended (a zombie has none)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _remove_files(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
