"""KungFu Fig 9's one table: each system point beside the ideal of its own framework.

The ideal is the rate of one worker without communication, × N: ``single`` for the
TensorFlow systems, ``torch-single`` for the PyTorch ones (lab.experiments.systems.IDEALS),
so a PyTorch system's efficiency is never taken against TensorFlow's speed. Built from the
protocol's table (``protocol_ideal_table``) or from a sweep's summary (``ideal_table``);
the figure, the table and the verdict all read it.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from lab.experiments.evidence import succeeded
from lab.experiments.systems import IDEALS, SYSTEMS, ideal_of

SINGLE = "single"  # the TensorFlow systems' ideal (one worker, no communication)
PROTOCOL_COLUMNS = ["repeats", "precise", "resolved", "reason", "seconds"]
COLUMNS = [
    "system",
    "label",
    "model",
    "workers",
    "ideal_of",
    "ideal_rate",
    "ideal",
    "actual",
    "actual_ci",
    "efficiency",
    "efficiency_ci",
    "run_dir",
]


def is_ideal(system: str) -> bool:
    """Whether ``system`` is one of the ideals (a worker alone), not a system point."""
    return system in IDEALS.values()


def ideal_for(system: str) -> str:
    """The ideal system of ``system`` (``single`` for a name the registry does not know)."""
    return ideal_of(system) if system in SYSTEMS else SINGLE


def protocol_ideal_table(table: pd.DataFrame) -> pd.DataFrame:
    """``ideal_table``'s rows from ``run_protocol``'s table: ``actual`` ± CI is a system
    point's throughput, ``ideal_rate`` its ideal's throughput for that model, ``efficiency``
    ± CI its per-round speedup over that ideal / N; with the repeats behind the speedup,
    whether it reached the target (``precise``), ``resolved`` (its interval excludes 1),
    why measuring stopped and the seconds spent. ``run_dir``: the point's last good run.
    Points without a measured value or a measured ideal are left out."""
    cols = [*COLUMNS, *PROTOCOL_COLUMNS]
    if table.empty:
        return pd.DataFrame(columns=cols)
    rate = {r.a: r for r in table[table["kind"] == "throughput"].itertuples()}
    runs = table.attrs.get("runs")
    last: dict[Any, str] = {}
    if runs is not None and len(runs):
        for r in runs[runs["ok"].astype(bool)].itertuples():
            last[r.point] = str(r.run_dir)
    rows = []
    for r in table[table["kind"] == "speedup"].itertuples():
        if not is_ideal(r.b[0]):
            continue  # a system over another (verdict reads those), not over the ideal
        system, model, n = r.a
        single, actual = rate.get(r.b), rate.get(r.a)
        if single is None or actual is None or pd.isna(single.value) or pd.isna(actual.value):
            continue  # no ideal, or the point never measured (every run of it failed)
        rows.append(
            {
                "system": system,
                "label": label(system),
                "model": model,
                "workers": int(n),
                "ideal_of": r.b[0],
                "ideal_rate": float(single.value),
                "ideal": float(single.value) * int(n),
                "actual": float(actual.value),
                "actual_ci": float(actual.ci),
                "efficiency": float(r.value) / int(n),
                "efficiency_ci": float(r.ci) / int(n),
                "run_dir": last.get(r.a),
                "repeats": int(r.repeats),
                "precise": bool(r.precise),
                "resolved": bool(r.resolved),
                "reason": r.reason,
                "seconds": float(r.seconds),
            }
        )
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values(["model", "system", "workers"], kind="stable").reset_index(drop=True)


def label(system: str) -> str:
    return SYSTEMS[system].label if system in SYSTEMS else system


def ideal_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per succeeded point of a system, with its own ideal for its model.

    ``ideal_rate`` is the newest succeeded run's rate of the row's ideal (``ideal_for``)
    for that model; ``ideal = ideal_rate × workers``; ``efficiency = actual / ideal`` with
    the CI of the ratio. Points without such a run are left out (no ideal to compare).
    """
    from lab.metrics.stats import Estimate, ratio

    ok = succeeded(summary)
    if ok.empty or "system" not in ok:
        return pd.DataFrame(columns=COLUMNS)
    alone = ok[ok["system"].map(is_ideal)]
    rates = {
        key: Estimate(float(g["throughput_per_rank"].iloc[-1]), _ci(g, "throughput_per_rank"))
        for key, g in alone.groupby(["system", "model"], sort=False)
    }
    rows = []
    for _, r in ok[~ok["system"].map(is_ideal)].iterrows():
        ideal = ideal_for(r["system"])
        base = rates.get((ideal, r["model"]))
        if base is None:
            continue
        n = int(r["workers"])
        actual = Estimate(float(r["throughput_total"]), _ci(r, "throughput_total"))
        eff = ratio(actual, Estimate(base.mean * n, base.ci * n))
        rows.append(
            {
                "system": r["system"],
                "label": label(r["system"]),
                "model": r["model"],
                "workers": n,
                "ideal_of": ideal,
                "ideal_rate": base.mean,
                "ideal": base.mean * n,
                "actual": actual.mean,
                "actual_ci": actual.ci,
                "efficiency": eff.mean,
                "efficiency_ci": eff.ci,
                "run_dir": r.get("run_dir"),
            }
        )
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.sort_values(["model", "system", "workers"], kind="stable").reset_index(drop=True)


def _ci(row: Any, col: str) -> float:
    key = f"{col}_ci"
    value = row.get(key, math.nan)
    if isinstance(value, pd.Series):
        value = value.iloc[-1]
    return float(value) if value is not None and pd.notna(value) else math.nan
