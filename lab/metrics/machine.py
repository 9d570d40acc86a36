"""This machine in a few words (CPU model, cores, GPUs): for captions and manifests.

Light on purpose (no pandas, no plotly): a launch records it in every manifest.
"""

from __future__ import annotations

import functools
import logging
import os
import platform
import shutil
import statistics
import subprocess
import time

log = logging.getLogger(__name__)

NVIDIA_SMI_TIMEOUT = 5.0
PROBE_LOOPS = 200_000  # 7-12 ms of one core here (17-27 M loops/s)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "Processor") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def gpu_names(timeout: float = NVIDIA_SMI_TIMEOUT) -> list[str]:
    """Names of the visible NVIDIA GPUs (empty without nvidia-smi or on its failure)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("nvidia-smi failed: %s", exc)
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


@functools.lru_cache(maxsize=1)
def hardware_description() -> str:
    """This machine in a few words: CPU model and core count, and its GPUs if any."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    text = f"{_cpu_model()}, {cores} cores"
    gpus = gpu_names()
    if gpus:
        counts: dict[str, int] = {}
        for name in gpus:
            counts[name] = counts.get(name, 0) + 1
        text += "; " + ", ".join(f"{n}× {name}" for name, n in counts.items())
    else:
        text += "; no GPU"
    return text


def cpu_speed(repeats: int = 5, loops: int = PROBE_LOOPS) -> float:
    """One core's speed now: millions of iterations per second of a fixed pure-Python loop,
    the median of ``repeats``. On a shared machine a core's speed moves (clock, steal, a
    busy sibling thread) and every timing with it: the batch runner takes one before each
    notebook, so that a slow run and a flipped verdict can be set beside the machine's
    speed at the time."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        x = 0
        for i in range(loops):
            x += i & 7
        times.append(time.perf_counter() - start)
    return round(loops / statistics.median(times) / 1e6, 2)
