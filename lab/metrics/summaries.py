"""One summary row per run, and an experiment's runs as one summary table on disk.

``summarize_run`` reads a run's records (lab.metrics.run_table) and manifest into its
identity, state, parameters and throughput with 95% CIs; ``summarize_runs`` does so for
every run of an experiment, oldest first, and writes ``results/<experiment>/summary.
{parquet,csv}``: links to that summary's own version under ``summary/``, so a later summary
never replaces an earlier one (lab.metrics.versions). Kept apart from the record table so
that what a row means (and how an upstream script's own total is used) is read in one place.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lab.metrics import stats
from lab.metrics.layout import read_manifest, results_root, runs_dir
from lab.metrics.run_table import flatten, is_missing, load_run, storable, storable_value
from lab.metrics.versions import save_version

log = logging.getLogger(__name__)

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
        row[key] = storable_value(value)
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
    ci = float(error) if error is not None and not is_missing(error) else math.nan
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
    """``results/<experiment>/summary.parquet`` (``summary.csv`` sits beside it): links to
    the latest summary written; during a rehearsal under ``results/rehearsals/``, so a
    rehearsal's runs never become a measured experiment's latest summary."""
    from lab.metrics.rehearsal import written_root

    return written_root(_results_root(results_root)) / experiment / "summary.parquet"


def write_summary(
    df: pd.DataFrame, experiment: str, results_root: str | os.PathLike[str] | None = None
) -> Path:
    """Write ``df`` as a new version of the experiment's summary (parquet and csv, both or
    neither) and link the latest to it; return the latest parquet path."""
    import io

    path = summary_path(experiment, results_root)
    table = storable(df)
    parquet = io.BytesIO()
    table.to_parquet(parquet, index=False)
    csv = table.to_csv(index=False)
    save_version({path: parquet.getvalue(), path.with_suffix(".csv"): csv})
    return path
