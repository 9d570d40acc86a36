"""Where a rank computes: the CPU at smoke scale, its GPU at paper scale.

``--device cpu`` runs every rank on the CPU with gloo. ``--device cuda`` puts each rank on
GPU ``LOCAL_RANK mod (GPUs of the host)`` and communicates with NCCL; when a host runs more
ranks than it has GPUs (worker packing, Fig 10), NCCL refuses two ranks on one GPU, so those
jobs use gloo, which reduces CUDA tensors through host memory. The canonical EST-order sum
is an ``all_gather`` then additions in a fixed order on every backend, so its bits do not
depend on NCCL's ring or tree either. Timers synchronise the GPU before they read the clock:
CUDA kernels return before they finish.
"""

from __future__ import annotations

import os
import time
from typing import Any


def cuda_available() -> bool:
    """Whether this machine's torch sees a GPU (imports torch)."""
    import torch

    return bool(torch.cuda.is_available())


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", 0)))


def local_world() -> int:
    return int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", 1)))


def select(kind: str) -> Any:
    """The torch.device of this rank, made current (``cuda``: the rank's GPU).

    Raises:
        RuntimeError: ``cuda`` asked where torch sees no GPU.
    """
    import torch

    if kind != "cuda":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("--device cuda: torch.cuda.is_available() is False on this host")
    index = local_rank() % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def backend(kind: str, requested: str = "auto") -> str:
    """``gloo`` on the CPU; on GPUs the one asked for, or for ``auto`` ``nccl`` unless this
    host runs more ranks than it shows GPUs. (Where the launcher gives each rank one GPU by
    ``CUDA_VISIBLE_DEVICES``, a rank sees one GPU whether or not it shares it, so the lab
    side, which knows the host's GPUs, asks for the backend explicitly.)"""
    if kind != "cuda":
        return "gloo"
    if requested != "auto":
        return requested
    import torch

    return "nccl" if local_world() <= torch.cuda.device_count() else "gloo"


def clock(device: Any) -> float:
    """``time.perf_counter()`` after the device has finished what was queued on it."""
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)
    return time.perf_counter()


def describe(device: Any) -> dict[str, Any]:
    """The header's fields about the device: its kind and, on a GPU, its model and index."""
    if device.type != "cuda":
        return {"device_kind": "cpu"}
    import torch

    return {
        "device_kind": "cuda",
        "gpu": torch.cuda.get_device_name(device),
        "gpu_index": device.index,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
    }


def memory(device: Any) -> dict[str, int]:
    """Peak GPU memory the rank's tensors held (``max_memory_allocated``) and the caching
    allocator reserved; empty on the CPU, where PSS and RSS are measured instead."""
    if device.type != "cuda":
        return {}
    import torch

    return {
        "cuda_max_allocated_bytes": int(torch.cuda.max_memory_allocated(device)),
        "cuda_max_reserved_bytes": int(torch.cuda.max_memory_reserved(device)),
    }
