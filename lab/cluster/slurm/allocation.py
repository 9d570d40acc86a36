"""Slurm's clients as the lab uses them: ask for a job (and say why it waits), read its
nodes, cancel it.

Every call has a timeout, runs with the lab's environment (``SLURM_CONF`` and friends
pass through) and reads Slurm's plain output formats (``squeue -o``, ``scontrol -o``),
which have been stable across the Slurm versions clusters run.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from lab.errors import LaunchError, StoppedWaiting

ALLOC_SECONDS = 300.0  # how long salloc may wait for nodes before the run is refused
CLIENT_SECONDS = 30.0
CANCEL_SECONDS = 10.0  # how long a cancelled job may stay COMPLETING before the run ends
POLL_SECONDS = 1.0  # how often squeue is asked why a job waits
STOP_SECONDS = 0.2  # how often a waiting allocation looks at Stop (and at salloc's end)
_GRANTED = re.compile(r"Granted job allocation (\d+)")

Say = Callable[[str], None]  # where words about a waiting job go (the run's view)


def slurm_env() -> dict[str, str]:
    """The environment Slurm's clients run with (``SLURM_CONF`` and friends pass through)."""
    return dict(os.environ)


def client(*argv: str, timeout: float = CLIENT_SECONDS) -> subprocess.CompletedProcess[str]:
    """One Slurm client command, its output captured."""
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env=slurm_env(), check=False
    )


def salloc_argv(slurm: dict[str, Any], name: str) -> list[str]:
    """``salloc --no-shell`` asking for what the profile's ``slurm`` section says.

    ``--no-kill``: a node that fails (or is taken DOWN: a revocation, lab.cluster.faults)
    ends the tasks it ran, not the whole job; the lab sees those ranks end and fails the
    run, unless a fault plan revoked them, and the other nodes go on."""
    argv = ["salloc", "--no-shell", "--no-kill", f"--job-name={name}"]
    argv.append(f"--nodes={int(slurm.get('nodes', 1))}")
    argv.append(f"--ntasks-per-node={int(slurm.get('tasks_per_node', 1))}")
    for key, flag in (("partition", "--partition"), ("account", "--account"), ("time", "--time")):
        if slurm.get(key):
            argv.append(f"{flag}={slurm[key]}")
    if slurm.get("gres"):
        argv.append(f"--gres={slurm['gres']}")
    elif int(slurm.get("gpus_per_node", 0)) > 0:
        argv.append(f"--gres=gpu:{int(slurm['gpus_per_node'])}")
    argv.extend(str(o) for o in slurm.get("options") or ())
    return argv


def pending_reason(name: str) -> str | None:
    """Why this user's job called ``name`` waits (squeue's REASON, e.g. ``Resources``,
    ``Priority``), or None when it does not wait (not yet queued, running, gone)."""
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        out = client(
            "squeue", "-h", f"--name={name}", f"--user={os.getuid()}", "-o", "%T|%r", timeout=10
        ).stdout
        for line in out.splitlines():
            state, _, reason = line.partition("|")
            if state.strip() == "PENDING":
                return reason.strip() or "None"
    return None


def allocate_job(
    slurm: dict[str, Any],
    name: str,
    say: Say | None = None,
    stop: threading.Event | None = None,
    reasons: list[str] | None = None,
) -> tuple[str, list[str]]:
    """A new job's id, and the reasons squeue gave while it waited (in order, each once).

    While salloc waits, squeue is asked every POLL_SECONDS why, and ``say`` is told
    ``"queued (reason: R)"`` whenever R changes; ``stop`` (the view's Stop while the job
    waits) is looked at every STOP_SECONDS. ``reasons``, when given, is the list the
    reasons are added to (it holds them also when the wait ends in an error).

    Raises:
        LaunchError: with salloc's words when Slurm refuses, or gives no nodes within
            the profile's ``wait`` seconds (ALLOC_SECONDS by default). Nothing stays queued.
        StoppedWaiting: ``stop`` was set while the job waited; the request is withdrawn
            and the job has left squeue (up to CANCEL_SECONDS) before this is raised.
    """
    argv = salloc_argv(slurm, name)
    wait = int(slurm.get("wait", ALLOC_SECONDS))
    reasons = [] if reasons is None else reasons
    asked = time.monotonic()
    proc = subprocess.Popen(
        [*argv, f"--immediate={wait}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=slurm_env(),
    )  # salloc --no-shell says a few lines: its pipes cannot fill while it waits
    deadline = asked + wait + 30
    next_ask = 0.0
    try:
        while proc.poll() is None:
            now = time.monotonic()
            if stop is not None and stop.is_set():
                said = f"queued (reason: {reasons[-1]})" if reasons else "queued"
                raise StoppedWaiting(said, now - asked)
            if now > deadline:
                raise LaunchError(f"{' '.join(argv)} got no nodes in {wait} s")
            if now >= next_ask:
                next_ask = now + POLL_SECONDS
                reason = pending_reason(name)
                if reason is not None and (not reasons or reasons[-1] != reason):
                    reasons.append(reason)
                    if say is not None:
                        say(f"queued (reason: {reason})")
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_SECONDS)
        out, err = proc.communicate(timeout=CLIENT_SECONDS)
    except BaseException:  # refused, stopped or interrupted while waiting: nothing stays queued
        _end(proc)
        cancel_by_name(name, wait=CANCEL_SECONDS)
        raise
    found = _GRANTED.search(err + out)
    if proc.returncode != 0 or not found:
        cancel_by_name(name)
        said = (err or out).strip()[-600:]
        raise LaunchError(f"{' '.join(argv)} failed ({proc.returncode}): {said}")
    return found.group(1), reasons


def _end(proc: subprocess.Popen[str]) -> None:
    """End a waiting salloc: SIGINT first (salloc withdraws its request), then kill."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(2)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def cancel(job_id: str, wait: float = CANCEL_SECONDS) -> None:
    """Cancel a job the lab allocated and wait (up to ``wait`` seconds) until squeue no
    longer lists it: while its node ends the tasks it stays COMPLETING, and a run is over
    only when its job has left the queue. A job already gone is fine."""
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        client("scancel", job_id)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            listed = client("squeue", "-h", "-j", job_id, "-o", "%T", timeout=10)
            if listed.returncode != 0 or not listed.stdout.strip():
                return
            time.sleep(0.1)


def cancel_by_name(name: str, wait: float = 0.0) -> bool:
    """Cancel any job of this run's name (an salloc that was ended while it waited), and
    wait up to ``wait`` seconds until squeue no longer lists one; whether none is listed
    (True without looking when ``wait`` is 0)."""
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        client("scancel", f"--name={name}", f"--user={os.getuid()}")
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            listed = client("squeue", "-h", f"--name={name}", f"--user={os.getuid()}", "-o", "%i")
            if listed.returncode == 0 and not listed.stdout.strip():
                return True
            time.sleep(0.1)
    return wait <= 0


def job_nodes(job_id: str) -> list[str]:
    """The node names of a job, expanded (``node[1-2]`` is node1, node2)."""
    info = client("scontrol", "show", "job", job_id, "--oneliner")
    found = re.search(r"\bNodeList=(\S+)", info.stdout)
    if info.returncode != 0 or not found or found.group(1) == "(null)":
        raise LaunchError(f"scontrol show job {job_id}: no nodes ({info.stderr.strip()})")
    names = client("scontrol", "show", "hostnames", found.group(1))
    nodes = names.stdout.split()
    if names.returncode != 0 or not nodes:
        raise LaunchError(f"scontrol show hostnames {found.group(1)}: {names.stderr.strip()}")
    return nodes


def node_addresses(nodes: list[str]) -> dict[str, str]:
    """Each node's IPv4 address, from its ``NodeAddr`` (resolved when it is a name): what
    kungfu-run's ``-H`` and a rendezvous (torchrun's master) need. A node whose address
    cannot be told is left out (its name is used as it is)."""
    info = client("scontrol", "-o", "show", "node", ",".join(nodes))
    found: dict[str, str] = {}
    for line in info.stdout.splitlines():
        name = re.search(r"\bNodeName=(\S+)", line)
        addr = re.search(r"\bNodeAddr=(\S+)", line)
        if name is None or addr is None or name.group(1) not in nodes:
            continue
        with contextlib.suppress(OSError):
            found[name.group(1)] = socket.gethostbyname(addr.group(1))
    return found


def tasks_per_node(slurm: dict[str, Any]) -> int:
    """Ranks per node: the profile's, or inside an allocation Slurm's own count."""
    env = os.environ.get("SLURM_NTASKS_PER_NODE", "")
    if "tasks_per_node" not in slurm and env.isdigit():
        return int(env)
    return int(slurm.get("tasks_per_node", 1))


__all__ = [
    "allocate_job",
    "cancel",
    "cancel_by_name",
    "job_nodes",
    "node_addresses",
    "pending_reason",
    "salloc_argv",
    "tasks_per_node",
]
