"""The results store: a run directory becomes a table, an experiment's runs a summary.

A run is a directory (DESIGN.md, contract 2): ``manifest.json`` plus one raw log per rank,
``rank-<r>.log``. Everything here is derived from those files and can be rebuilt from
them. The work is done by one module per job, and their names are gathered here, so
``lab.metrics.store.load_run`` and friends stay where notebooks and rooms find them:

- lab.metrics.run_table: one run's records as a table, cached as ``records.parquet``;
- lab.metrics.summaries: one row per run, ``results/<experiment>/summary.{parquet,csv}``;
- lab.metrics.pooled: one row per parameter combination over repeated runs.

The results root is ``<repo>/results`` unless ``DISTLAB_RESULTS`` says otherwise.
"""

from __future__ import annotations

from lab.metrics.layout import MANIFEST_NAME, read_manifest, results_root, runs_dir
from lab.metrics.pooled import aggregate_runs, pool_runs
from lab.metrics.run_table import CACHE_NAME, LAUNCHER_LOG, flatten, load_run, rank_logs
from lab.metrics.summaries import (
    SUMMARY_COLUMNS,
    list_runs,
    script_total,
    summarize_run,
    summarize_runs,
    summary_path,
    write_summary,
)

__all__ = [
    "CACHE_NAME",
    "LAUNCHER_LOG",
    "MANIFEST_NAME",
    "SUMMARY_COLUMNS",
    "aggregate_runs",
    "flatten",
    "list_runs",
    "load_run",
    "pool_runs",
    "rank_logs",
    "read_manifest",
    "results_root",
    "runs_dir",
    "script_total",
    "summarize_run",
    "summarize_runs",
    "summary_path",
    "write_summary",
]
