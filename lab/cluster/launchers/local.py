"""The embedded default launcher: one plain process per rank.

Each rank gets the variables torch.distributed, TensorFlow and the lab's workloads read
(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, CROSS_RANK, CROSS_SIZE, MASTER_ADDR,
MASTER_PORT), every rank's address (LAB_RANK_ADDRS) and its GPU. A rank on a remote host
is still one process: its spec names the host and the supervisor reaches it over SSH.
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.cluster.inventory import Slot
from lab.cluster.launchers.base import (
    Job,
    PerRankLauncher,
    ProcessSpec,
    base_env,
    check_job,
    rank_env,
    register,
    rendezvous_port,
    visible_devices,
)


@register("local")
class LocalLauncher(PerRankLauncher):
    """N plain processes, one per rank, each on its slot's host.

    Options:
        master_port: the port rank 0 listens on for rendezvous (default: a free one per job).
    """

    # torch.distributed's store and TF's MultiWorkerMirroredStrategy servers listen on every
    # interface: a one-machine job runs on lo alone (lab.cluster.loopback_hook)
    wide_listeners = True

    def build(self, job: Job, slots: Sequence[Slot]) -> list[ProcessSpec]:
        check_job(job, slots)
        ordered = sorted(slots, key=lambda s: s.rank)
        master_addr = ordered[0].host.reach_address
        master_port = rendezvous_port(job, "master_port", [ordered[0].host])
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
