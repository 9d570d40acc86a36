"""Where and how ranks run: hosts and slots, one command builder per launcher, SSH, and the
supervision that starts, streams, times out, cancels and tears down every process of a run.

A run is described by a ``LaunchRequest`` and run by ``run_request``; ``launch`` does both
from keywords (all three live in lab.cluster.launching). The public names are re-exported
lazily, so ``import lab.cluster`` starts nothing and imports no engine.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "launch": "lab.cluster.launching",
    "run_request": "lab.cluster.launching",
    "LaunchRequest": "lab.cluster.request",
    "RunResult": "lab.cluster.supervisor",
    "RunState": "lab.cluster.supervisor",
    "Host": "lab.cluster.inventory",
    "Cluster": "lab.cluster.inventory",
    "parse_hosts": "lab.cluster.inventory",
    "load_profile": "lab.cluster.inventory",
    "as_cluster": "lab.cluster.inventory",
    "resolve_cluster": "lab.cluster.inventory",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lab.cluster' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
