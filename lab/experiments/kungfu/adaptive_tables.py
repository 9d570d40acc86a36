"""KungFu Fig 4's tables, read back from the runs' records. Rank 0's steps per arm and seed
(the curves), the loss each run began and ended with, one row of final numbers per arm and seed,
and each policy's time to target with its interval. The figure and the verdict read these.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from lab.experiments.evidence import succeeded

NOISE_WINDOW = 15  # steps in the running median the noise-scale panel draws
PANELS = {
    "noise_scale": f"gradient noise scale (median of {NOISE_WINDOW} steps)",
    "batch_size": "global batch size",
    "img_per_s": "throughput (samples/s, all workers)",
    "eval_loss": "evaluation loss",
}
FINAL_COLUMNS = [
    "policy",
    "start batch",
    "seed",
    "final_batch_size",
    "time_to_target",
    "steps_to_target",
    "samples_to_target",
    "eval_loss",
    "target_loss",
    "run_dir",
]


def _rank0(row: Any, kind: str) -> pd.DataFrame:
    """Rank 0's records of ``kind`` in the summary row's run, each with its arm's ``policy``
    and ``start_batch`` (from the point where the records lack them: one-arm runs)."""
    from lab.metrics.store import load_run

    recs = load_run(row["run_dir"])
    mine = recs[(recs["kind"] == kind) & (recs["source"] == "lab") & (recs["rank"] == 0)].copy()
    for col, key in (("policy", "policy"), ("start_batch", "batch")):
        given = mine[col] if col in mine else pd.Series(index=mine.index, dtype=object)
        mine[col] = given.where(given.notna(), row.get(key))
    return mine


def curves(summary: pd.DataFrame) -> pd.DataFrame:
    """Rank 0's steps of every succeeded run, per arm and seed on its training clock
    (``elapsed``: the steps' seconds so far, the clock time to target is read on), named
    ``run`` ("adaptive (start 32)"), with ``img_per_s`` of the whole job, and the run's
    ``target_loss`` and ``lr`` from its header where it printed them."""
    parts = []
    for _, row in succeeded(summary).iterrows():
        s = _rank0(row, "step")
        if s.empty:
            continue
        header = _rank0(row, "header")
        s["seed"] = pd.to_numeric(s["seed"], errors="coerce") if "seed" in s else 0
        s["run"] = s["policy"] + " (start " + s["start_batch"].astype(int).astype(str) + ")"
        s["elapsed"] = s.groupby(["run", "seed"], dropna=False)["seconds"].cumsum()
        s["img_per_s"] = s["batch_size"] / s["seconds"]
        for col in ("target_loss", "lr"):
            first = header[col].dropna() if col in header else pd.Series(dtype=float)
            s[col] = float(first.iloc[0]) if len(first) else math.nan
        parts.append(s)
    cols = ["run", "seed", "elapsed", *PANELS, "target_loss", "lr"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


def noise_medians(table: pd.DataFrame, window: int | None = None) -> pd.Series:
    """Each seed's noise-scale estimates as the running median of the last ``window``
    steps (default ``NOISE_WINDOW``; fewer at its start): where |G|² is estimated near
    zero one step reads ±10^5 or more, which a median of its neighbours passes over
    while the trend the policy acts on stays."""
    window = window or NOISE_WINDOW
    ordered = table.sort_values("elapsed")
    medians = ordered.groupby(["run", "seed"], dropna=False)["noise_scale"].transform(
        lambda s: pd.to_numeric(s, errors="coerce").rolling(window, min_periods=1).median()
    )
    return medians.reindex(table.index)


def loss_rises(table: pd.DataFrame) -> pd.DataFrame:
    """Per run: its seeds' first and last evaluation loss (means over seeds) and whether
    the loss ended above where it began in every seed (``diverged``: training made the
    model worse, so that run never reaches the target)."""
    rows = []
    for run, g in table.groupby("run", sort=True):
        ends = g.dropna(subset=["eval_loss"]).sort_values("elapsed").groupby("seed")["eval_loss"]
        first, last = ends.first(), ends.last()
        rows.append(
            {
                "run": run,
                "first": float(first.mean()) if len(first) else math.nan,
                "last": float(last.mean()) if len(last) else math.nan,
                "diverged": bool(len(first)) and bool((last > first).all()),
            }
        )
    return pd.DataFrame(rows, columns=["run", "first", "last", "diverged"])


def finals(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per arm and seed of every succeeded run: its summary record (final batch,
    time/steps/samples to the target loss, NaN where it never reached it)."""
    rows = []
    for _, row in succeeded(summary).iterrows():
        for _, last in _rank0(row, "summary").iterrows():
            rows.append(
                {
                    "policy": last["policy"],
                    "start batch": int(last["start_batch"]),
                    **{c: last.get(c, math.nan) for c in FINAL_COLUMNS[2:-1]},
                    "run_dir": row["run_dir"],
                }
            )
    df = pd.DataFrame(rows, columns=FINAL_COLUMNS)
    for col in FINAL_COLUMNS[2:-1]:
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def times(table: pd.DataFrame) -> pd.DataFrame:
    """Per policy and start batch: seeds, how many reached the target, and the mean time
    to target over them with its 95% interval (``low``, ``high``; NaN with one seed)."""
    from lab.metrics.stats import mean_ci

    rows = []
    for (policy, batch), g in table.groupby(["policy", "start batch"], sort=False):
        t = pd.to_numeric(g["time_to_target"], errors="coerce")
        est = mean_ci(t.dropna())
        rows.append(
            {
                "policy": policy,
                "start batch": int(batch),
                "seeds": len(g),
                "reached": int(t.notna().sum()),
                "time_to_target": est.mean,
                "ci": est.ci,
                "low": est.low,
                "high": est.high,
            }
        )
    return pd.DataFrame(rows)
