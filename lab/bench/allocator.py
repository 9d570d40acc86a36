"""glibc's handling of freed memory, for CPU processes that stand in for GPUs.

glibc gives large freed blocks back to the kernel: a block above the mmap threshold is
unmapped when freed, and the top of the heap is trimmed. A training step that allocates
tens of MB then faults its pages in again at every step. ``tiny_cnn`` at 224² and batch 32
took 12,512 page faults a step, a third of its time in the kernel (0.060 s against 0.040 s
with the blocks kept). That kernel time also varied with what ran beside the process: in
the Fig 14 stand-ins (lab.experiments.easyscale.standin_table) the v100/p100 step-time
ratio at 224² read 0.41 to 0.99 over nine runs (quota ratio 0.625), and 0.61–0.65 over
three quiet runs with the blocks kept. A GPU's caching allocator (PyTorch's) keeps freed
blocks for the next step; ``keep_freed_memory`` makes glibc do the same.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

# mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
TRIM_THRESHOLD = 2**30  # the heap's top is trimmed only above this
CHOICES = ("keep", "system")


def keep_freed_memory() -> dict[str, Any]:
    """Serve every block from the heap (no block of its own mapped and unmapped: with
    blocks above 32 MiB, glibc's largest mmap threshold, still mapped, a step kept up to
    1,254 of its faults) and trim the heap only above ``TRIM_THRESHOLD``, for the rest of
    this process; call before the large allocations. Returns what applied, for a header
    record (``allocator_applied`` False where the C library has no ``mallopt``)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError) as e:
        return {"allocator": "system", "allocator_applied": False, "allocator_error": str(e)}
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return {"allocator": "keep", "allocator_applied": ok, "trim_threshold": TRIM_THRESHOLD}


def configure(choice: str) -> dict[str, Any]:
    """``keep`` (``keep_freed_memory``) or ``system`` (glibc as it is)."""
    if choice == "keep":
        return keep_freed_memory()
    return {"allocator": "system", "allocator_applied": False}
