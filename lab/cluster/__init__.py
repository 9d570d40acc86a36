"""Where and how ranks run: hosts and slots, one command builder per launcher, SSH, and the
supervision that starts, streams, times out, cancels and tears down every process of a run.

The public names are re-exported lazily, so ``import lab.cluster`` starts nothing and
imports no engine. ``launch`` is the exception: it is both a submodule and the function
it defines, and Python sets a package's attribute to a submodule when that is first
imported. So the (light: no engine, no process) submodule is imported here and the name
bound to the function, so that ``lab.cluster.launch`` is the function whatever was
imported first.
"""

from __future__ import annotations

import importlib
from typing import Any

launch = importlib.import_module("lab.cluster.launch").launch

_EXPORTS = {
    "RunResult": "lab.cluster.supervisor",
    "RunState": "lab.cluster.supervisor",
    "Host": "lab.cluster.inventory",
    "Cluster": "lab.cluster.inventory",
    "parse_hosts": "lab.cluster.inventory",
    "load_profile": "lab.cluster.inventory",
    "resolve_cluster": "lab.cluster.inventory",
}

__all__ = sorted(["launch", *_EXPORTS])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lab.cluster' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
