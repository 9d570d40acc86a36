"""WHICH experiment: the systems registry, points, sweeps and controls, and one room per
paper (its systems, published values with sources, figure builders and verdicts).

Notebooks import from here and from their paper's room (``lab.experiments.<paper>``). The
names below load on first use, so importing this package starts no engine.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SCALE_DEFAULTS": "points",
    "WORKLOAD_FLAGS": "systems",
    "complete_point": "points",
    "grid": "points",
    "run_point": "points",
    "scale_parameters": "points",
    "cluster_name": "points",
    "workload_argv": "points",
    "System": "systems",
    "SYSTEMS": "systems",
    "get_system": "systems",
    "python_for": "systems",
    "split_available": "systems",
    "run_sweep": "sweeps",
    "run_rounds": "sweeps",
    "require_succeeded": "outcome",
    "Controls": "controls",
    "Verdict": "verdicts",
    "Status": "verdicts",
    "save_verdict": "verdicts",
    "load_verdict": "saved",
    "conclude": "outputs",
    "published_rows": "published",
    "published_table": "published",
}
_ELSEWHERE = {"overhead_table": "lab.metrics.overheads", "ShownIn": "lab.cluster.view"}

__all__ = sorted([*_EXPORTS, *_ELSEWHERE])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = f"{__name__}.{_EXPORTS[name]}"
    elif name in _ELSEWHERE:
        module = _ELSEWHERE[name]
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
