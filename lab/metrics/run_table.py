"""A run directory becomes a table: one row per record, cached beside the logs.

A run is a directory (DESIGN.md, contract 2): ``manifest.json`` plus one raw log per rank,
``rank-<r>.log``. Its table is derived from those files alone and can be rebuilt from them:
``records.parquet`` caches it (rebuilt when a log or the manifest is newer), so a figure
re-drawn from many runs parses each log once. Also here: how nested parameters and mixed
columns are made storable, which the summaries (lab.metrics.summaries) share.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from lab.metrics.layout import MANIFEST_NAME, read_manifest
from lab.metrics.parsers import SCHEMA, parse_line
from lab.metrics.shares import flag_before_shares

log = logging.getLogger(__name__)

CACHE_NAME = "records.parquet"
LAUNCHER_LOG = "launcher.log"
_RANK_LOG = re.compile(r"^rank-(\d+)\.log$")


def flatten(params: Mapping[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    """Nested parameters as one level: ``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    out: dict[str, Any] = {}
    for key, value in (params or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def rank_logs(run_dir: str | os.PathLike[str]) -> dict[int, Path]:
    """``{rank: path}`` of the run's per-rank logs, in rank order."""
    found = {}
    for path in Path(run_dir).glob("rank-*.log"):
        if m := _RANK_LOG.match(path.name):
            found[int(m.group(1))] = path
    return dict(sorted(found.items()))


def storable_value(value: Any) -> Any:
    """A value one parquet cell holds: nested ones as JSON text, NaN as None."""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str, sort_keys=True)
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def is_missing(value: Any) -> bool:
    """None or NaN: no value, whichever way pandas or a record spelled it."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def storable(df: pd.DataFrame) -> pd.DataFrame:
    """Columns parquet can hold: nested values as JSON text, mixed columns as text."""
    df = df.copy()
    for col in df.columns:
        if df[col].dtype != object:
            continue
        values = df[col].map(storable_value)
        present = values.dropna()
        if len(present) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in present
        ):
            df[col] = pd.to_numeric(values)
        elif len(present) and all(isinstance(v, bool) for v in present):
            df[col] = values.astype("boolean")
        else:
            df[col] = values.map(
                lambda v: None if is_missing(v) else v if isinstance(v, str) else str(v)
            )
    return df


def _logs(run_dir: Path) -> list[tuple[int | None, Path]]:
    """Per-rank logs, then ``launcher.log`` (lines no rank could be named for; a launcher
    tag inside them may still tell the rank)."""
    logs: list[tuple[int | None, Path]] = list(rank_logs(run_dir).items())
    launcher = run_dir / LAUNCHER_LOG
    if launcher.is_file():
        logs.append((None, launcher))
    return logs


def _parse_run(run_dir: Path, manifest: Mapping[str, Any]) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for rank, path in _logs(run_dir):
        with path.open(encoding="utf-8", errors="replace", newline="") as fh:
            for lineno, line in enumerate(fh, 1):
                for rec in parse_line(line, rank=rank):
                    rec["log"] = path.name
                    rec["line"] = lineno
                    rows.append(rec)
    df = pd.DataFrame(rows, columns=list(SCHEMA) if not rows else None)
    df["run_id"] = run_dir.name
    df["experiment"] = manifest.get("experiment") or run_dir.parent.name
    for name, value in flatten(manifest.get("params")).items():
        value = storable_value(value)
        if name in df.columns:
            df[name] = df[name].where(df[name].notna(), value)
        else:
            df[name] = value
    return storable(df)


def _cache_is_fresh(run_dir: Path, cache: Path) -> bool:
    if not cache.exists():
        return False
    built = cache.stat().st_mtime_ns
    sources = [p for _, p in _logs(run_dir)] + [run_dir / MANIFEST_NAME]
    return all(not p.exists() or p.stat().st_mtime_ns <= built for p in sources)


def load_run(run_dir: str | os.PathLike[str], use_cache: bool = True) -> pd.DataFrame:
    """All records of one run as a table: one row per record.

    Columns: the record schema (kind, rank, step, samples, seconds, throughput, name,
    value, source), any extra record fields, ``log`` and ``line`` (where it was printed),
    ``run_id``, ``experiment`` and the manifest's parameters (flattened). On emulated hosts
    that started at full speed, steps that ran before the CPU shares applied are flagged
    ``before_shares`` and count as warm-up (lab.metrics.shares). A record's own
    ``rank`` wins; otherwise the rank comes from the log's name (``rank-<r>.log``), and
    lines in ``launcher.log`` keep the rank their launcher tag gives, if any. The table is
    cached as ``records.parquet`` in the run directory.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"no run directory at {run_dir}")
    cache = run_dir / CACHE_NAME
    manifest = read_manifest(run_dir)
    if use_cache and _cache_is_fresh(run_dir, cache):
        try:
            # Flagged again on reading: caches written before the flag existed lack it.
            return flag_before_shares(pd.read_parquet(cache), manifest)
        except (OSError, ValueError) as exc:
            log.warning("rebuilding unreadable cache %s: %s", cache, exc)
    df = flag_before_shares(_parse_run(run_dir, manifest), manifest)
    if use_cache:
        tmp = cache.with_name(f".{CACHE_NAME}.{os.getpid()}.tmp")
        try:
            df.to_parquet(tmp, index=False)
            os.replace(tmp, cache)
        except (OSError, ValueError, ImportError) as exc:
            log.warning("cannot cache records of %s: %s", run_dir, exc)
            tmp.unlink(missing_ok=True)
    return df
