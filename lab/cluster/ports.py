"""Free TCP ports for one job's services, so that two jobs on one machine never collide.

Engines listen on ports their launcher names: KungFu's peers, runner and config server, TF
servers, torch.distributed's and ps-lite's rendezvous. Fixed defaults made the second of two
jobs at once fail with "address already in use". Each launcher now asks here for a block of
consecutive ports (KungFu needs its peers' ports consecutive) unless the user gave one.

How a block is chosen: a random start in ``[LOW, HIGH)``, which lies below Linux's
ephemeral range (32768-60999), so outgoing connections never hold these ports. When the
job has a host on this machine (local, or emulated: a namespace here), every port of the
block is probed by binding it on all addresses, which fails if anything listens on it on
any address; a busy block is skipped. Remote hosts cannot be probed from here: their block
is random only (the chance that two jobs pick overlapping blocks of ``n`` ports is about
``2n / (HIGH - LOW)``). Blocks handed out by this process are remembered for a while, so
two launches from one notebook never get the same block. Between the probe and the
engine's bind another program may still take a port; such a job fails at start with the
engine's own "address already in use", and running it again picks another block.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Iterable, Sequence

from lab.cluster.inventory import Host
from lab.errors import LaunchError

LOW, HIGH = 20000, 32000
HELD_SECONDS = 60.0  # how long a block handed out here is not handed out again
TRIES = 200

_lock = threading.Lock()
_given: dict[int, float] = {}  # port -> when it was handed out


def probes_here(hosts: Iterable[Host]) -> bool:
    """Whether any of ``hosts`` runs on this machine (a local host or an emulated one)."""
    return any(h.is_local or h.namespace is not None for h in hosts)


def is_free(port: int) -> bool:
    """Whether nothing on this machine listens on ``port`` (on any address) right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def port_block(
    hosts: Sequence[Host],
    count: int,
    also: Sequence[int] = (),
    rng: random.Random | None = None,
) -> int:
    """The first of ``count`` consecutive ports for a job on ``hosts``.

    Args:
        hosts: the hosts whose services take these ports (the same ports on each).
        count: how many consecutive ports.
        also: offsets whose ports must be free too (KungFu's monitoring takes port + 10000).
        rng: the random source (tests pass a seeded one).

    Raises:
        LaunchError: no free block was found in ``TRIES`` random starts.
    """
    if not 0 < count <= (HIGH - LOW) // 4:
        raise ValueError(f"count must be 1..{(HIGH - LOW) // 4}, got {count}")
    rng = rng or random.SystemRandom()
    probe = probes_here(hosts)
    now = time.monotonic()
    with _lock:
        for port, when in list(_given.items()):
            if now - when > HELD_SECONDS:
                del _given[port]
        for _ in range(TRIES):
            first = rng.randrange(LOW, HIGH - count)
            block = range(first, first + count)
            wanted = [p + off for p in block for off in (0, *also)]
            if any(p in _given for p in wanted) or any(p > 65535 for p in wanted):
                continue
            if probe and not all(is_free(p) for p in wanted):
                continue
            _given.update((p, now) for p in block)
            return first
    raise LaunchError(
        f"no {count} consecutive free TCP ports found in {LOW}-{HIGH} after {TRIES} tries; "
        "give the launcher's port option explicitly"
    )


def free_port(hosts: Sequence[Host]) -> int:
    """One port for a job's single service (a rendezvous) on ``hosts``."""
    return port_block(hosts, 1)
