"""The results store: a run directory becomes a table, an experiment's runs a summary.

A run is a directory (DESIGN.md, contract 2): ``manifest.json`` plus one raw log per rank,
``rank-<r>.log``. Everything here is derived from those files and can be rebuilt from
them: ``records.parquet`` caches a run's parsed records (rebuilt when a log or the
manifest is newer), and ``results/<experiment>/summary.{parquet,csv}`` holds one row per
run. The results root is ``<repo>/results`` unless ``DISTLAB_RESULTS`` says otherwise.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lab.metrics import stats
from lab.metrics.layout import MANIFEST_NAME, read_manifest, results_root, runs_dir
from lab.metrics.parsers import SCHEMA, parse_line
from lab.metrics.shares import flag_before_shares

log = logging.getLogger(__name__)

CACHE_NAME = "records.parquet"
LAUNCHER_LOG = "launcher.log"
_RANK_LOG = re.compile(r"^rank-(\d+)\.log$")
# Summary columns that a parameter must not overwrite; such a parameter gets "param." in front.
SUMMARY_COLUMNS = (
    "run_id",
    "experiment",
    "run_dir",
    "state",
    "exit_code",
    "started",
    "ended",
    "launcher",
    "error",
    "ranks",
    "steps",
    "throughput_per_rank",
    "throughput_per_rank_ci",
    "throughput_total",
    "throughput_total_ci",
    "throughput_from",
)


_results_root = results_root  # the functions below take a parameter of the same name


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


def _scalar(value: Any) -> Any:
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str, sort_keys=True)
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _storable(df: pd.DataFrame) -> pd.DataFrame:
    """Columns parquet can hold: nested values as JSON text, mixed columns as text."""
    df = df.copy()
    for col in df.columns:
        if df[col].dtype != object:
            continue
        values = df[col].map(_scalar)
        present = values.dropna()
        if len(present) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in present
        ):
            df[col] = pd.to_numeric(values)
        elif len(present) and all(isinstance(v, bool) for v in present):
            df[col] = values.astype("boolean")
        else:
            df[col] = values.map(
                lambda v: None if _missing(v) else v if isinstance(v, str) else str(v)
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
        value = _scalar(value)
        if name in df.columns:
            df[name] = df[name].where(df[name].notna(), value)
        else:
            df[name] = value
    return _storable(df)


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


def list_runs(experiment: str, results_root: str | os.PathLike[str] | None = None) -> list[Path]:
    """The experiment's run directories, oldest first (their names begin with a timestamp)."""
    base = runs_dir(experiment, results_root)
    if not base.is_dir():
        return []
    dirs = [p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")]
    # Names start with a one-second timestamp; within a second the manifest's start decides.
    return sorted(
        dirs, key=lambda p: (p.name[:15], _epoch(read_manifest(p).get("started")), p.name)
    )


def _epoch(value: Any) -> float:
    if isinstance(value, Mapping):
        value = value.get("epoch")
    return float(value) if isinstance(value, (int, float)) else 0.0


def _when(value: Any) -> Any:
    """A manifest time as text: ``{"iso": ..., "epoch": ...}`` gives its ISO form."""
    if isinstance(value, Mapping):
        return value.get("iso") if value.get("iso") is not None else value.get("epoch")
    return value


def summarize_run(run_dir: str | os.PathLike[str], warmup: int = 0) -> dict[str, Any]:
    """One summary row for a run: identity, state, parameters, throughput with 95% CIs.

    ``throughput_per_rank`` is the mean over ranks of each rank's mean step throughput;
    ``throughput_total`` is their sum (DESIGN: total = Σ per-rank means). CIs are 95%
    half-widths, NaN when a rank has a single measured step. When fewer ranks reported
    steps than the run had (upstream scripts report on rank 0 only), the total is the
    script's own (see ``script_total``); ``throughput_from`` says which it is.
    """
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    records = load_run(run_dir)
    ranks = stats.per_rank_throughput(records, warmup=warmup)
    total = stats.total_throughput(ranks) if len(ranks) else stats.Estimate(math.nan)
    n = len(ranks)
    devices, source = n, "sum over ranks"
    if n:
        upstream = script_total(records, ranks, manifest.get("np"))
        if upstream is not None:
            total, devices, source = upstream
    row: dict[str, Any] = {
        "run_id": run_dir.name,
        "experiment": manifest.get("experiment") or run_dir.parent.name,
        "run_dir": str(run_dir),
        "state": manifest.get("state"),
        "exit_code": manifest.get("exit_code"),
        "started": _when(manifest.get("started")),
        "ended": _when(manifest.get("ended")),
        "launcher": manifest.get("launcher"),
        "error": manifest.get("error"),
        "ranks": n,
        "steps": int(ranks["n"].sum()) if n else 0,
        "throughput_per_rank": total.mean / devices if n else math.nan,
        "throughput_per_rank_ci": total.ci / devices if n else math.nan,
        "throughput_total": total.mean,
        "throughput_total_ci": total.ci,
        "throughput_from": source if n else None,
    }
    for name, value in flatten(manifest.get("params")).items():
        key = f"param.{name}" if name in SUMMARY_COLUMNS else name
        row[key] = _scalar(value)
    return row


def script_total(
    records: pd.DataFrame, ranks: pd.DataFrame, np: Any = None
) -> tuple[stats.Estimate, int, str] | None:
    """The total of a run whose script reports for all devices from some ranks only.

    Horovod's and KungFu's benchmarks print per-device rates on rank 0 alone and close
    with ``Total img/sec on N GPU(s): X +-Y``; summing the ranks that printed would give
    rank 0's rate as the total. Used only when fewer ranks reported steps than the run
    had (``np``, else the total line's N): then the total is the script's own total
    line, else its per-device mean (``Img/sec per GPU``, else the reporting ranks' mean
    step rate) times the number of devices.

    Returns:
        (total, devices, how it was found), or None when every rank reported its steps.
    """
    summaries = _summaries(records)
    totals = summaries[summaries["name"] == "total"] if len(summaries) else summaries
    line = totals.iloc[-1] if len(totals) else None
    devices = _count(np) or (_count(line.get("np")) if line is not None else None)
    if devices is None or len(ranks) >= devices:
        return None
    if line is not None and _count(line.get("np")) == devices:
        return _estimate(line["throughput"], line.get("error")), devices, "script total line"
    per = summaries[summaries["name"] == "per_device"] if len(summaries) else summaries
    if len(per):
        mean = float(pd.to_numeric(per["throughput"]).mean())
        error = float(pd.to_numeric(per.get("error", pd.Series(dtype=float))).mean())
        est = stats.Estimate(mean * devices, error * devices)
        return est, devices, "script per-device rate × devices"
    est = stats.Estimate(float(ranks["mean"].mean()) * devices, math.nan)
    return est, devices, "reporting ranks' mean × devices"


def _summaries(records: pd.DataFrame) -> pd.DataFrame:
    if records.empty or not {"kind", "name", "throughput"} <= set(records.columns):
        return records.iloc[0:0]
    out = records[(records["kind"] == "summary") & records["throughput"].notna()]
    return out.reset_index(drop=True)


def _count(value: Any) -> int | None:
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    return n if n >= 1 else None


def _estimate(mean: Any, error: Any) -> stats.Estimate:
    ci = float(error) if error is not None and not _missing(error) else math.nan
    return stats.Estimate(float(mean), ci)


def summarize_runs(
    experiment: str,
    results_root: str | os.PathLike[str] | None = None,
    group_by: Sequence[str] | str | None = None,
    warmup: int = 0,
    write: bool = True,
) -> pd.DataFrame:
    """One row per run of ``experiment`` (see ``summarize_run``), rebuilt from the run dirs.

    Args:
        experiment: the group under results/runs/.
        results_root: the results root (default: see ``results_root``).
        group_by: columns (usually parameters) to sort the rows by, in that order; they
            come first in the table. Use ``aggregate_runs`` for one row per group.
        warmup: steps per rank to leave out of throughput.
        write: also write ``results/<experiment>/summary.parquet`` and ``summary.csv``.
    """
    rows = []
    for run_dir in list_runs(experiment, results_root):
        try:
            rows.append(summarize_run(run_dir, warmup=warmup))
        except (OSError, ValueError) as exc:
            log.warning("skipping run %s: %s", run_dir, exc)
    df = pd.DataFrame(rows)
    keys = [group_by] if isinstance(group_by, str) else list(group_by or [])
    keys = [k for k in keys if k in df.columns]
    if keys:
        df = df[keys + [c for c in df.columns if c not in keys]]
        df = df.sort_values([*keys, "run_id"], kind="stable").reset_index(drop=True)
    if write:
        write_summary(df, experiment, results_root)
    return df


def summary_path(experiment: str, results_root: str | os.PathLike[str] | None = None) -> Path:
    """``results/<experiment>/summary.parquet`` (``summary.csv`` sits beside it)."""
    return _results_root(results_root) / experiment / "summary.parquet"


def write_summary(
    df: pd.DataFrame, experiment: str, results_root: str | os.PathLike[str] | None = None
) -> Path:
    """Write ``df`` as the experiment's summary (parquet and csv); return the parquet path."""
    path = summary_path(experiment, results_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = _storable(df)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    table.to_parquet(tmp, index=False)
    os.replace(tmp, path)
    table.to_csv(path.with_suffix(".csv"), index=False)
    return path


def aggregate_runs(
    summary: pd.DataFrame, by: Sequence[str] | str, states: Sequence[str] | None = ("succeeded",)
) -> pd.DataFrame:
    """One row per parameter combination: throughput averaged over repeated runs.

    With one run in a group the run's own CI is kept; with several, the CI is that of the
    mean over runs (t-distribution). Rows whose state is not in ``states`` are left out
    (``states=None`` keeps all).
    """
    keys = [by] if isinstance(by, str) else list(by)
    df = (
        summary
        if states is None or "state" not in summary
        else summary[summary["state"].isin(states)]
    )
    rows = []
    for values, group in df.groupby(keys, sort=True, dropna=False):
        row = dict(zip(keys, values if isinstance(values, tuple) else (values,), strict=True))
        row["runs"] = len(group)
        for col in ("throughput_total", "throughput_per_rank"):
            if len(group) == 1:
                row[col], row[f"{col}_ci"] = group[col].iloc[0], group[f"{col}_ci"].iloc[0]
            else:
                est = stats.mean_ci(group[col])
                row[col], row[f"{col}_ci"] = est.mean, est.ci
        row["steps"] = int(group["steps"].sum())
        rows.append(row)
    return pd.DataFrame(rows)


def pool_runs(
    summary: pd.DataFrame,
    by: Sequence[str] | str,
    warmup: int = 0,
    states: Sequence[str] | None = ("succeeded",),
) -> pd.DataFrame:
    """One row per parameter combination, from every measured step of its runs pooled.

    Unlike ``aggregate_runs`` (a t-interval over a handful of run means, very wide with 2
    or 3 repeats), the interval here is that of the mean step throughput over all steps of
    all the group's runs, so repeats spread over time still narrow it.
    """
    keys = [by] if isinstance(by, str) else list(by)
    df = summary if states is None else summary[summary["state"].isin(states)]
    rows = []
    for values, group in df.groupby(keys, sort=True, dropna=False):
        steps = pd.concat(
            [stats.step_throughput(load_run(d), warmup=warmup) for d in group["run_dir"]],
            ignore_index=True,
        )
        est = stats.mean_ci(steps["throughput"])
        row = dict(zip(keys, values if isinstance(values, tuple) else (values,), strict=True))
        row.update(
            runs=len(group),
            steps=len(steps),
            throughput_per_rank=est.mean,
            throughput_per_rank_ci=est.ci,
        )
        rows.append(row)
    return pd.DataFrame(rows)
