"""Where ranks run, as frozen dataclasses: a Host, a rank's Slot on one, a Cluster of hosts.

Kept apart from reading them (lab.cluster.inventory parses host strings, hostfiles and
profiles into these, and places ranks on slots) so that the types have no parser behind
them; lab.cluster.inventory re-exports every name here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from lab.cluster.device_types import DeviceType
from lab.errors import ParameterError

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "local"})


@dataclass(frozen=True)
class Host:
    """One machine ranks can be placed on.

    Args:
        name: the name ranks are placed by, and that SSH reaches (an ~/.ssh/config alias
            works); "localhost" runs ranks as local processes.
        slots: how many ranks it holds.
        gpus: GPUs on it (0 on CPU hosts); local ranks get CUDA_VISIBLE_DEVICES from these.
        address: address other ranks reach it at, when it differs from ``name``.
        ssh_port, ssh_user: how to reach it, when ~/.ssh/config does not say.
        python: the Python interpreter to run workloads with on that host.
        workdir: the directory ranks start in on that host.
        namespace: the network namespace it lives in (emulated clusters only).
        device_type: the name of its device type in the cluster's ``device_types``; its
            ranks inherit that type's threads, ISA and CPU share.
    """

    name: str
    slots: int = 1
    gpus: int = 0
    address: str | None = None
    ssh_port: int | None = None
    ssh_user: str | None = None
    python: str | None = None
    workdir: str | None = None
    namespace: str | None = None
    device_type: str | None = None

    @property
    def is_local(self) -> bool:
        return self.name in LOCAL_NAMES and self.ssh_port is None

    @property
    def reach_address(self) -> str:
        return self.address or ("127.0.0.1" if self.is_local else self.name)


@dataclass(frozen=True)
class Slot:
    """One rank's place: which host, and its rank numbers in the job."""

    rank: int
    local_rank: int
    size: int
    local_size: int
    cross_rank: int
    cross_size: int
    host: Host

    @property
    def gpu(self) -> int | None:
        if self.host.gpus <= 0:
            return None
        return self.local_rank % self.host.gpus


@dataclass(frozen=True)
class Cluster:
    """A named set of hosts, with optional emulation settings (see lab.cluster.emulation)."""

    name: str
    hosts: tuple[Host, ...]
    python: str | None = None
    workdir: str | None = None
    emulated: dict[str, Any] | None = None
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    device_types: tuple[DeviceType, ...] = ()

    @property
    def slots(self) -> int:
        return sum(h.slots for h in self.hosts)

    @property
    def is_local(self) -> bool:
        return all(h.is_local for h in self.hosts) and not self.emulated

    @property
    def slurm(self) -> dict[str, Any] | None:
        """The profile's ``slurm`` section: hosts come from a Slurm allocation."""
        return self.extra.get("slurm")

    def device_type(self, name: str) -> DeviceType:
        """The device type called ``name``; ParameterError naming the known ones if none."""
        for dt in self.device_types:
            if dt.name == name:
                return dt
        known = ", ".join(dt.name for dt in self.device_types) or "none (add device_types)"
        raise ParameterError("device_type", name, f"types of cluster {self.name!r}: {known}")

    def host_string(self) -> str:
        """The hosts in the ``h1:4,h2:4`` form that mpirun, horovodrun and kungfu-run take."""
        return ",".join(f"{h.reach_address}:{h.slots}" for h in self.hosts)


def local_cluster(slots: int | None = None) -> Cluster:
    """This machine alone, with one slot per core unless told otherwise."""
    n = slots if slots is not None else (os.cpu_count() or 1)
    return Cluster(name="local", hosts=(Host("localhost", slots=n),))
