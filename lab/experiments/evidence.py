"""What a verdict rests on: the runs behind a summary and where they ran.

Verdict functions in the paper rooms take these from the sweep's summary, so a verdict
names the run directories its numbers come from and the machines those runs used (read
from their manifests, not from the machine the notebook happens to run on now).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pandas as pd

SUCCEEDED = "succeeded"


def succeeded(summary: pd.DataFrame) -> pd.DataFrame:
    """The rows of a sweep's summary whose run succeeded (all rows without a ``state``)."""
    if summary is None or len(summary) == 0:
        return pd.DataFrame() if summary is None else summary
    if "state" not in summary:
        return summary
    return summary[summary["state"] == SUCCEEDED]


def run_dirs(summary: pd.DataFrame) -> tuple[str, ...]:
    """The run directories of the succeeded rows, in order, without repeats."""
    ok = succeeded(summary)
    if "run_dir" not in ok:
        return ()
    return tuple(dict.fromkeys(str(d) for d in ok["run_dir"].dropna()))


def where(dirs: Iterable[Any]) -> str:
    """Where the runs ran, from their manifests: ``"cluster 'emulated-4' on <machine>"``."""
    from lab.metrics.layout import read_manifest

    places = []
    for run_dir in dirs:
        manifest = read_manifest(run_dir)
        if not manifest:
            continue
        name = (manifest.get("cluster") or {}).get("name") or "local"
        machine = (manifest.get("launched_on") or {}).get("hardware") or "an unrecorded machine"
        places.append(f"cluster '{name}' on {machine}")
    return "; ".join(dict.fromkeys(places))


def systems_table(runnable: Iterable[str], skipped: dict[str, str]) -> pd.DataFrame:
    """Which systems a notebook measures here and why the others are left out."""
    from lab.experiments.systems import SYSTEMS

    rows = [{"system": SYSTEMS[s].label, "status": "measured"} for s in runnable]
    rows += [
        {"system": SYSTEMS[s].label, "status": f"not measured: {why}"} for s, why in skipped.items()
    ]
    return pd.DataFrame(rows, columns=["system", "status"])


def ratio_status(est: Any) -> Any:
    """A ratio's status against 1 by its 95% CI: *reproduced* when the whole interval is
    above 1 (the paper's direction), *not reproduced* when it is all below 1, *not
    resolved* when it holds 1 or has no CI."""
    import math

    from lab.experiments.verdicts import Status

    if est.ci is None or math.isnan(est.ci):
        return Status.NOT_RESOLVED
    if est.low > 1.0:
        return Status.REPRODUCED
    if est.high < 1.0:
        return Status.NOT_REPRODUCED
    return Status.NOT_RESOLVED


def best_ratio(
    rows: pd.DataFrame,
    num: Callable[[str], bool],
    den: Callable[[str], bool],
    value: str = "throughput_total",
) -> tuple[Any, str] | None:
    """The fastest ``num`` system's ``value`` over the fastest ``den`` system's, at the
    largest worker count, for the first model that has both (with the ratio's CI from
    ``<value>_ci``); None when no model has both. Also says what was compared.
    """
    from lab.experiments.systems import SYSTEMS
    from lab.metrics.stats import Estimate, ratio

    pair = fastest_pair(rows, num, den, value)
    if pair is None:
        return None
    model, x, y = pair
    est = ratio(
        Estimate(float(x[value]), float(x[f"{value}_ci"])),
        Estimate(float(y[value]), float(y[f"{value}_ci"])),
    )
    names = [SYSTEMS[s].label if s in SYSTEMS else s for s in (x["system"], y["system"])]
    return est, f"{names[0]} vs {names[1]}, {model}, {int(x['workers'])} workers"


def fastest_pair(
    rows: pd.DataFrame,
    num: Callable[[str], bool],
    den: Callable[[str], bool],
    value: str = "throughput_total",
) -> tuple[str, Any, Any] | None:
    """At the largest worker count, for the first model that has both: (model, the fastest
    ``num`` system's row, the fastest ``den`` system's row) by ``value``; None if none."""
    ok = succeeded(rows)
    if ok.empty:
        return None
    top = ok[ok["workers"] == ok["workers"].max()]
    for model, group in top.groupby("model", sort=False):
        a = group[group["system"].map(num)]
        b = group[group["system"].map(den)]
        if not (a.empty or b.empty):
            return str(model), a.loc[a[value].idxmax()], b.loc[b[value].idxmax()]
    return None


def pair_speedups(
    keys: Sequence[tuple[str, str, int]], num: Callable[[str], bool], den: Callable[[str], bool]
) -> list[Any]:
    """For the protocol: at the largest worker count, every ``num`` system's speedup over
    every ``den`` one on the same model, as compared quantities on keys ``(system, model,
    workers)``: a ratio per round, so what a round shares cancels (``paired_speedup``
    reads it back)."""
    from lab.metrics.protocol import speedup

    n = max((k[2] for k in keys), default=0)
    return [
        speedup(a, b, "speedup({} · {} · {} workers)".format(*a) + f" / {b[0]}")
        for a in keys
        for b in keys
        if a[2] == b[2] == n and a[1] == b[1] and num(a[0]) and den(b[0])
    ]


def paired_speedup(
    rows: pd.DataFrame,
    measured: pd.DataFrame | None,
    num: Callable[[str], bool],
    den: Callable[[str], bool],
    value: str = "throughput_total",
) -> Any:
    """The protocol's round-by-round speedup of the fastest ``num`` system over the fastest
    ``den`` one at the largest worker count (the pair ``best_ratio`` compares), as an
    Estimate; None when the protocol table ``measured`` has no such row with an interval."""
    from lab.metrics.stats import Estimate

    pair = fastest_pair(rows, num, den, value)
    if measured is None or pair is None or "kind" not in measured:
        return None
    model, x, y = pair
    want = ((x["system"], model, int(x["workers"])), (y["system"], model, int(y["workers"])))
    for r in measured[measured["kind"] == "speedup"].itertuples():
        if (tuple(r.a), tuple(r.b)) == want and r.ci == r.ci:
            return Estimate(float(r.value), float(r.ci), int(r.repeats))
    return None


def protocol_run_dirs(table: pd.DataFrame) -> list[str]:
    """The succeeded runs behind a ``run_protocol`` table (``table.attrs["runs"]``), each
    once (a run that alternated a feature off and on stands behind two points)."""
    runs = table.attrs.get("runs")
    if runs is None or len(runs) == 0:
        return []
    ok = runs[runs["ok"].astype(bool) & (runs["run_dir"].astype(str) != "")]
    return list(dict.fromkeys(str(d) for d in ok["run_dir"]))
