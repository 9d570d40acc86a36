"""Overheads of settings against a baseline, from a summary table, with propagated CIs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def overhead_table(
    summary: Any,
    setting: str = "setting",
    baseline: str = "baseline",
    within: Sequence[str] = ("model",),
    y: str = "throughput_per_rank",
) -> Any:
    """Overhead ``1 − with/without`` of every setting against the baseline run of the
    same group (e.g. the same model), with the 95% CI propagated from both throughputs.
    ``summary`` may be one row per run or per setting (``lab.metrics.aggregate_runs``).

    Returns:
        One row per (group, setting) other than the baseline: the group's columns,
        ``setting``, the throughputs, ``overhead`` and ``overhead_ci`` (fractions).
    """
    import pandas as pd

    from lab.metrics.stats import Estimate, overhead

    ok = summary[summary["state"] == "succeeded"] if "state" in summary else summary
    rows = []
    for keys, group in ok.groupby(list(within)):
        base = group[group[setting] == baseline]
        if base.empty:
            continue
        b = base.iloc[-1]
        for _, row in group[group[setting] != baseline].iterrows():
            est = overhead(Estimate(row[y], row[f"{y}_ci"]), Estimate(b[y], b[f"{y}_ci"]))
            rows.append(
                {
                    **dict(zip(within, keys if isinstance(keys, tuple) else (keys,), strict=True)),
                    setting: row[setting],
                    "throughput": row[y],
                    "baseline_throughput": b[y],
                    "overhead": est.mean,
                    "overhead_ci": est.ci,
                }
            )
    return pd.DataFrame(rows)
