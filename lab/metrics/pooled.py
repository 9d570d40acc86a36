"""One row per parameter combination, from the rows of its repeated runs.

Two ways, because they answer different questions: ``aggregate_runs`` averages the runs'
means (a t-interval over a handful of runs: honest about run-to-run spread, wide with 2 or
3 repeats), ``pool_runs`` pools every measured step of the group's runs (the interval of
the mean step throughput, which repeats spread over time still narrow).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from lab.metrics import stats
from lab.metrics.run_table import load_run


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
