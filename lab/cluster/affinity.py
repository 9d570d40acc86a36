"""Each rank its own cores on a shared host: ``python -m lab.cluster.affinity [--slots N] -- prog``.

Several ranks on one multi-core host, unbound (the lab's mpirun and horovodrun say
``--bind-to none`` as Horovod does), share every core: each engine sizes its thread pools
to all of them, and the OS moves threads around as it likes. On this 2-core machine two
KungFu ranks then ran 377-681 img/s from one run of the *same* point to the next, which
hid a 5-20% monitoring overhead under ±15 points; pinned, 591-705. A pinned rank's threads
stay on its core, and TensorFlow sizes its pools to that core (it counts the cores it may
run on).

This wrapper runs before the rank's program, so every thread the program starts inherits
the pin: it finds the rank's place on its host from what its launcher set (KungFu's peer
list, OpenMPI's, Horovod's or torchrun's local rank and size), takes its share of the
cores it may run on (``cores_for``: the cores split into ``--slots`` equal blocks, or into
as many as there are ranks if more; more ranks than cores share them round robin), says
so on stderr and execs the program. A host's slots are its devices: with one slot per core
a lone rank gets one core too, as it would get one GPU, so a scaling curve's first point
has what every later rank has. Without a local rank it pins nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

# launchers' own names for "this rank's index among the ranks of its host"
LOCAL_RANK_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_RANK", "HOROVOD_LOCAL_RANK", "LOCAL_RANK")
LOCAL_SIZE_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_SIZE", "HOROVOD_LOCAL_SIZE", "LOCAL_WORLD_SIZE")
PINNED_VARIABLE = "DISTLAB_PINNED_CPUS"


def kungfu_local(env: Mapping[str, str]) -> tuple[int, int] | None:
    """(index among the peers at this rank's address, how many there are) from kungfu-run's
    ``KUNGFU_SELF_SPEC`` (``ip:port``) and ``KUNGFU_INIT_PEERS`` (every peer, in rank
    order); None when absent."""
    me = env.get("KUNGFU_SELF_SPEC")
    peers = [p for p in env.get("KUNGFU_INIT_PEERS", "").split(",") if p]
    if not me or me not in peers:
        return None
    host = me.rsplit(":", 1)[0]
    here = [p for p in peers if p.rsplit(":", 1)[0] == host]
    return here.index(me), len(here)


def _first_int(env: Mapping[str, str], names: Sequence[str]) -> int | None:
    for name in names:
        value = env.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def local_place(env: Mapping[str, str]) -> tuple[int, int] | None:
    """(local rank, ranks on this host) from whichever launcher started the rank; None if
    none said (the size defaults to rank + 1 where a launcher gives the rank alone)."""
    rank = _first_int(env, LOCAL_RANK_VARIABLES)
    if rank is None:
        return kungfu_local(env)
    size = _first_int(env, LOCAL_SIZE_VARIABLES)
    return rank, max(size or 0, rank + 1)


def cores_for(rank: int, size: int, allowed: Sequence[int], slots: int = 1) -> list[int]:
    """Local rank ``rank``'s share of the ``allowed`` cores among ``size`` ranks on a host
    of ``slots`` slots: a contiguous block of ``len(allowed) // max(size, slots)``, or one
    core round robin when there are more ranks (or slots) than cores."""
    if not allowed:
        raise ValueError("no CPU core allowed")
    if not 0 <= rank < size:
        raise ValueError(f"local rank {rank} outside 0..{size - 1}")
    cores = sorted(allowed)
    parts = max(size, slots)
    if parts > len(cores):
        return [cores[rank % len(cores)]]
    share = len(cores) // parts
    return cores[rank * share : (rank + 1) * share]


def pin(env: Mapping[str, str], slots: int = 1) -> list[int] | None:
    """Pin this process to its rank's cores; those cores, or None with no local rank."""
    place = local_place(env)
    if place is None:
        return None
    cores = cores_for(*place, sorted(os.sched_getaffinity(0)), slots)
    os.sched_setaffinity(0, cores)
    return cores


USAGE = "usage: python -m lab.cluster.affinity [--slots N] -- PROGRAM [ARGS...]"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    slots = 1
    if args[:1] == ["--slots"] and len(args) > 1 and args[1].isdigit():
        slots, args = int(args[1]), args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args or args[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    cores = pin(os.environ, slots)
    if cores is not None:
        listed = ",".join(map(str, cores))
        os.environ[PINNED_VARIABLE] = listed
        print(f"distlab: rank pinned to CPU {listed}", file=sys.stderr)
    os.execvp(args[0], args)
    return 0  # not reached: execvp replaces this process


if __name__ == "__main__":
    sys.exit(main())
