"""Where a rank computes: the CPU at smoke scale, its GPU at paper scale.

``--device cpu`` runs every rank on the CPU with gloo. ``--device cuda`` puts each rank on
GPU ``LOCAL_RANK mod (GPUs of the host)`` and communicates with NCCL; when a host runs more
ranks than it has GPUs (worker packing, Fig 10), NCCL refuses two ranks on one GPU, so those
jobs use gloo, which reduces CUDA tensors through host memory. The canonical EST-order sum
is an ``all_gather`` then additions in a fixed order on every backend, so its bits do not
depend on NCCL's ring or tree either. Timers synchronise the GPU before they read the clock:
CUDA kernels return before they finish. On an emulated host that declares GPUs (a
rehearsal) a ``cuda`` rank falls back to the CPU and gloo, and says so (``fallback``).
"""

from __future__ import annotations

import os
import time
from typing import Any

from lab.metrics.rehearsal import EMULATED_GPUS_ENV


def cuda_available() -> bool:
    """Whether this machine's torch sees a GPU (imports torch)."""
    import torch

    return bool(torch.cuda.is_available())


def fallback(kind: str, backend: str) -> tuple[str, str, dict[str, str]]:
    """The device kind and backend this rank really uses, and what fell back, said.

    On an emulated host that declares GPUs (``$DISTLAB_EMULATED_GPUS``, a rehearsal's
    host) the GPUs are declared, not there: a ``cuda`` rank computes on the CPU and NCCL
    becomes gloo; the rank's header records both (``device_fallback``,
    ``backend_fallback``). Anywhere else nothing falls back: ``--device cuda`` without a
    GPU is an error. Decided without importing torch: device settings must be applied
    before it is (lab.bench.easyscale.determinism).
    """
    declared = os.environ.get(EMULATED_GPUS_ENV)
    if kind != "cuda" or not declared:
        return kind, backend, {}
    said = {"device_fallback": f"cuda -> cpu (an emulated host declaring {declared} GPUs)"}
    if backend != "gloo":
        said["backend_fallback"] = f"{backend} -> gloo"
    return "cpu", "gloo", said


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
