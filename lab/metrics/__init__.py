"""What a run means: records, parsers, statistics, the results store, figures and sweeps.

Ranks print records (``records``); the lab side parses them and foreign output
(``parsers``), turns run directories into tables and summaries (``store``, which gathers
``run_table``, ``summaries`` and ``pooled``), estimates throughput, scaling efficiency and
overhead with confidence intervals (``stats``), draws figures with the papers' published
numbers beside the lab's (``figures``, ``published``) and runs parameter sweeps resumably
(``sweep``). Names below are imported on first use, so importing ``lab.metrics`` costs
nothing (pandas and plotly load when needed).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "emit": "records",
    "format_record": "records",
    "parse_record": "records",
    "parse_line": "parsers",
    "parse_lines": "parsers",
    "register_format": "parsers",
    "Estimate": "stats",
    "mean_ci": "stats",
    "step_throughput": "stats",
    "per_rank_throughput": "stats",
    "total_throughput": "stats",
    "scaling_efficiency": "stats",
    "overhead": "stats",
    "results_root": "layout",
    "load_run": "run_table",
    "list_runs": "summaries",
    "summarize_run": "summaries",
    "summarize_runs": "summaries",
    "aggregate_runs": "pooled",
    "pool_runs": "pooled",
    "Published": "published",
    "derived_overheads": "published",
    "throughput_vs_workers": "figures",
    "grouped_bars": "figures",
    "overhead_bars": "figures",
    "caption": "figures",
    "runs_caption": "figures",
    "hardware_description": "figures",
    "style": "figures",
    "Sweep": "sweep",
    "LiveFigure": "sweep",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lab.metrics' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"lab.metrics.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
