"""The embedded default launcher: one plain process per rank, and helpers every launcher shares.

Each rank gets the variables torch.distributed, TensorFlow and the lab's workloads read
(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, CROSS_RANK, CROSS_SIZE, MASTER_ADDR,
MASTER_PORT), every rank's address (LAB_RANK_ADDRS) and its GPU. A rank on a remote host
is still one process: its spec names the host and the supervisor reaches it over SSH.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from lab.cluster.inventory import Host, Slot
from lab.cluster.launchers.base import Job, PerRankLauncher, ProcessSpec, register
from lab.cluster.launchers.gpu import visible_devices
from lab.errors import LaunchError, ParameterError

DEFAULT_MASTER_PORT = 29500


def launcher_host() -> Host:
    """The machine the lab runs on: where mpirun, horovodrun and friends are started."""
    return Host("localhost")


def hosts_in_order(slots: Sequence[Slot]) -> list[tuple[Host, list[Slot]]]:
    """The hosts the ranks use, in placement order, each with its slots by local rank."""
    groups: dict[Host, list[Slot]] = {}
    for slot in sorted(slots, key=lambda s: s.rank):
        groups.setdefault(slot.host, []).append(slot)
    return [(host, sorted(group, key=lambda s: s.local_rank)) for host, group in groups.items()]


def base_env(job: Job) -> dict[str, str]:
    """What every process of a job gets: unbuffered Python (lines arrive as printed), then
    the job's own variables, which win."""
    return {"PYTHONUNBUFFERED": "1", **{str(k): str(v) for k, v in job.env.items()}}


def port_option(job: Job, name: str, default: int) -> int:
    """A TCP port from ``job.options[name]``, checked, or ``default``."""
    value: Any = job.options.get(name, default)
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise ParameterError(name, value, "a TCP port number 1..65535") from None
    if not 0 < port < 65536:
        raise ParameterError(name, value, "a TCP port number 1..65535")
    return port


def choice_option(job: Job, name: str, default: str | None, allowed: Iterable[str]) -> str | None:
    """``job.options[name]`` if it is one of ``allowed``; ``default`` when not given."""
    allowed = tuple(allowed)
    value = job.options.get(name, default)
    if value is not None and value not in allowed:
        raise ParameterError(name, value, ", ".join(allowed))
    return value


def check_job(job: Job, slots: Sequence[Slot]) -> None:
    """Fail before launch on what no launcher can run: no command, or slots that do not
    match the number of ranks."""
    if not job.command:
        raise ParameterError("command", job.command, "a non-empty argv, e.g. ('python', 'x.py')")
    if len(slots) != job.np or sorted(s.rank for s in slots) != list(range(job.np)):
        raise LaunchError(
            f"np={job.np} but {len(slots)} slots were given; place ranks with "
            "lab.cluster.inventory.allocate(cluster, np)"
        )


def rank_env(slot: Slot, master_addr: str, master_port: int) -> dict[str, str]:
    """The per-rank variables of torch.distributed's env:// convention, plus cross rank."""
    return {
        "RANK": str(slot.rank),
        "WORLD_SIZE": str(slot.size),
        "LOCAL_RANK": str(slot.local_rank),
        "LOCAL_WORLD_SIZE": str(slot.local_size),
        "CROSS_RANK": str(slot.cross_rank),
        "CROSS_SIZE": str(slot.cross_size),
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
    }


@register("local")
class LocalLauncher(PerRankLauncher):
    """N plain processes, one per rank, each on its slot's host.

    Options:
        master_port: the port rank 0 listens on for rendezvous (default 29500).
    """

    def build(self, job: Job, slots: Sequence[Slot]) -> list[ProcessSpec]:
        check_job(job, slots)
        ordered = sorted(slots, key=lambda s: s.rank)
        master_addr = ordered[0].host.reach_address
        master_port = port_option(job, "master_port", DEFAULT_MASTER_PORT)
        # every rank's address, in rank order: engines that list all peers (TF's
        # MultiWorkerMirroredStrategy) need more than MASTER_ADDR on multi-host clusters
        common = {
            **base_env(job),
            "LAB_RANK_ADDRS": ",".join(s.host.reach_address for s in ordered),
        }
        return [
            ProcessSpec(
                argv=tuple(job.command),
                env={**common, **rank_env(s, master_addr, master_port), **visible_devices(s)},
                ranks=(s.rank,),
                host=s.host,
                role="rank",
            )
            for s in ordered
        ]
