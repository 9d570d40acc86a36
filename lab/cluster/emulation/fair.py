"""Engines on equal terms: the settings an emulated host gives its ranks by default.

A GPU node has idle cores, so an engine whose progress loop spins while it waits (OpenMPI
polling its sockets, Horovod's background thread waking every cycle) costs it nothing. A
host with 0.4 of a core pays for that spinning out of its quota, and the figure ends up
comparing spin settings instead of engines. So every emulated host's ranks get, unless the
profile says otherwise:

- ``OMPI_MCA_mpi_yield_when_idle=1``: OpenMPI yields the CPU while it polls for
  progress, so the rank's compute threads in the same host get the quota.
- ``HOROVOD_CYCLE_TIME=5`` (ms; Horovod's default is 1, horovodrun --help): each cycle
  wakes the background thread and runs a coordination round. A smoke step on a 0.4-core
  host takes 100 ms or more, so 5 ms adds at most a few percent of latency per allreduce
  while cutting wake-ups and coordination rounds five-fold (and fusing more tensors).
- Threads matched to the host's CPU share, ``ceil(cpu)`` (at least 1): TensorFlow's
  ``TF_NUM_INTRAOP_THREADS`` (inter-op: at least 2, see ``fair_env``) and ``OMP_NUM_THREADS``,
  ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` (also what PyTorch reads). Engines
  otherwise size their pools by the machine's cores and time-slice a fraction of one.

They are defaults: a variable already set in the rank's environment (``launch(env=...)``,
the lab's own environment) wins. The profile turns them off with ``emulated: {fair:
false}`` or changes single ones with ``fair: {HOROVOD_CYCLE_TIME: 1, OMP_NUM_THREADS:
null}`` (null leaves a variable unset). What a host got is in the manifest
(``emulation.hosts.<h>.env``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from lab.errors import ParameterError

CYCLE_TIME_MS = 5
MIN_INTEROP_THREADS = 2
THREAD_VARIABLES = (
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
)


def check_fair(value: Any) -> bool | dict[str, str | None]:
    """The profile's ``fair`` entry: True (default), False, or {VARIABLE: value or None}."""
    if value is None or isinstance(value, bool):
        return True if value is None else value
    if isinstance(value, Mapping) and all(isinstance(k, str) and k for k in value):
        return {k: None if v is None else str(v) for k, v in value.items()}
    raise ParameterError("emulated.fair", value, "true, false, or {VARIABLE: value or null}")


def fair_env(cpu: float | None, fair: Any = True) -> dict[str, str]:
    """The fair defaults for a host with ``cpu`` cores (None: no quota, no thread caps)."""
    setting = check_fair(fair)
    if setting is False:
        return {}
    env = {"OMPI_MCA_mpi_yield_when_idle": "1", "HOROVOD_CYCLE_TIME": str(CYCLE_TIME_MS)}
    if cpu is not None:
        threads = max(1, math.ceil(cpu))
        env.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))
        # TensorFlow's parameter-server runtime deadlocks with one inter-op thread (a
        # blocking receive holds the only thread the send it waits for needs): measured
        # here, a 1-worker, 1-PS job on emulated-2 never took a step with 1, ran with 2.
        env["TF_NUM_INTEROP_THREADS"] = str(max(MIN_INTEROP_THREADS, threads))
    if isinstance(setting, dict):
        env.update(setting)  # type: ignore[arg-type]
    return {k: v for k, v in env.items() if v is not None}
