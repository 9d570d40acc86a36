"""One small module per launcher, all behind lab.cluster.launchers.base.Launcher."""

from lab.cluster.launchers import horovod, horovod_elastic, kungfu, local, mpi, ps, torchrun
from lab.cluster.launchers.base import LAUNCHERS, get_launcher

__all__ = [
    "LAUNCHERS",
    "get_launcher",
    "horovod",
    "horovod_elastic",
    "kungfu",
    "local",
    "mpi",
    "ps",
    "torchrun",
]
