"""distlab: reproduce distributed-training papers from Jupyter notebooks.

Layers (DESIGN.md): ``lab.cluster`` says where and how ranks run, ``lab.bench`` what they
run, ``lab.metrics`` what a run means. The handful of names a notebook needs are
re-exported here, lazily, so ``import lab`` stays instant and imports no engine.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "launch": "lab.cluster",
    "RunResult": "lab.cluster",
    "load_profile": "lab.cluster",
    "load_run": "lab.metrics",
    "summarize_runs": "lab.metrics",
    "Sweep": "lab.metrics",
    "run_notebooks": "lab.experiments.notebooks",
    "LabError": "lab.errors",
    "REPO_ROOT": "lab.metrics.layout",
    "ParameterError": "lab.errors",
    "RanksFailed": "lab.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lab' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
