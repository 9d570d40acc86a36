"""Measured step times per (workload, device type, ESTs per device), for the trace simulator.

EasyScale's schedulers (Figs 14–15) need how fast a job runs on each device type with a
given number of ESTs per device; the artifact replays logs of such runs. Here they come
from the lab's own EST runs: any run directory of ``python -m lab.bench.easyscale``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

COLUMNS = ["workload", "device_type", "ests_per_device", "step_seconds"]


def throughput_table(
    run_dirs: Iterable[str | Path], warmup: int = 1, statistic: str = "median"
) -> pd.DataFrame:
    """One row per (workload, device type, ESTs per device) with its step time.

    Args:
        run_dirs: EST run directories (other systems' records are ignored).
        warmup: leading steps of each process that are not timed.
        statistic: ``median`` or ``mean`` of the timed steps, pooled over runs and processes.

    Returns:
        A DataFrame with columns workload (the model), device_type, ests_per_device (ESTs
        the process held) and step_seconds (one mini-batch of all its ESTs, sync included),
        plus ``samples`` (timed steps pooled). Empty (same columns) if nothing was timed.
    """
    from lab.metrics.store import load_run

    if statistic not in ("median", "mean"):
        raise ValueError(f"statistic={statistic!r}; allowed: median, mean")
    rows = []
    for run_dir in run_dirs:
        df = load_run(run_dir)
        heads = df[(df["kind"] == "header") & (df.get("system") == "est")]
        for _, head in heads.iterrows():
            rank = head["rank"]
            steps = df[(df["kind"] == "step") & (df["rank"] == rank)].sort_values("step")
            for seconds in steps["seconds"].iloc[warmup:]:
                rows.append(
                    {
                        "workload": head["model"],
                        "device_type": head["device_type"],
                        "ests_per_device": len(_indices(head["est_indices"])),
                        "step_seconds": float(seconds),
                    }
                )
    if not rows:
        return pd.DataFrame(columns=[*COLUMNS, "samples"])
    pooled = pd.DataFrame(rows).groupby(COLUMNS[:3])["step_seconds"]
    out = pooled.agg([statistic, "size"]).reset_index()
    return out.rename(columns={statistic: "step_seconds", "size": "samples"})


def _indices(value: object) -> list[int]:
    """EST indices of a header, stored as a list or (after the parquet cache) JSON text."""
    import json

    if isinstance(value, str):
        return list(json.loads(value))
    return list(value)  # type: ignore[call-overload]
