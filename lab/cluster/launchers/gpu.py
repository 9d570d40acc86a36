"""GPU assignment per local rank, for launchers that start ranks themselves.

mpirun, horovodrun and torchrun leave device choice to the workload (it reads its local
rank); kungfu-run sets CUDA_VISIBLE_DEVICES itself. Plain local ranks and parameter-server
processes get it from here.
"""

from __future__ import annotations

from lab.cluster.inventory import Slot

CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"


def visible_devices(slot: Slot) -> dict[str, str]:
    """``CUDA_VISIBLE_DEVICES`` for the rank on ``slot``: its one GPU on a GPU host.

    On a CPU host nothing is set, so a user's own setting (or none) is left alone.
    """
    gpu = slot.gpu
    return {} if gpu is None else {CUDA_VISIBLE_DEVICES: str(gpu)}


def no_devices() -> dict[str, str]:
    """Hide every GPU: for processes that must not take one (parameter servers)."""
    return {CUDA_VISIBLE_DEVICES: ""}
