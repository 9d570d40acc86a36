"""KungFu Fig 8: what monitoring training online costs in throughput.

Each setting (no monitoring, gradient noise scale, gradient variance every step and every
8 steps) runs ``repeats`` times in alternating order; every measured step of a setting's
repeats is pooled (``lab.metrics.pool_runs``) and its overhead against the baseline of the
same system and model is ``1 − with/without`` with a 95% CI. The paper prints
throughputs, so its overheads are derived from them (``derived_overheads``).

The status of a setting (``status_of``) compares the published overhead with the lab's
interval ``overhead ± CI``:

- *reproduced*: the published overhead lies inside the interval and the interval
  excludes zero (the lab resolves an overhead, and it is the paper's);
- *not resolved at this scale*: the interval holds the published overhead and zero too
  (it is wider than the effect), or it cannot be told (no CI);
- *not reproduced*: the published overhead lies outside the interval.

The figure's status is *not reproduced* if any setting is, else *not resolved* if any
setting is, else *reproduced*.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from lab.errors import NothingMeasured
from lab.experiments.evidence import where
from lab.experiments.kungfu.published import KUNGFU_OSDI20
from lab.experiments.verdicts import Status, Verdict

EXPERIMENT = "kungfu/fig8_monitoring"
FIGURE = "Fig 8"
BASELINE = "baseline"
# name -> (--monitor, --interval); the names are the published rows' settings
SETTINGS: dict[str, tuple[str, int]] = {
    BASELINE: ("none", 1),
    "noise scale": ("noise-scale", 1),
    "variance interval 1": ("variance", 1),
    "variance interval 8": ("variance", 8),
}
DEFAULTS: dict[str, dict[str, Any]] = {
    "smoke": {
        "systems": ["horovod-gloo", "kungfu-artifact-monitoring"],
        "models": ["small_cnn"],
        "workers": 2,
        "batch_size": 32,
        "repeats": 2,
    },
    "paper": {  # the artifact: 4 × K80, ResNet50, batch 8 per GPU
        "systems": ["horovod-gloo", "kungfu-artifact-monitoring"],
        "models": ["ResNet50"],
        "workers": 4,
        "batch_size": 8,
        "repeats": 3,
    },
}


def points(p: Mapping[str, Any], systems: Sequence[str]) -> list[dict[str, Any]]:
    """Every system × model × setting, ``repeats`` times, the settings' order reversed on
    every other repeat so that drift in the machine's speed hits all settings alike."""
    order = list(SETTINGS.items())
    return [
        {
            "system": s,
            "model": m,
            "workers": p["workers"],
            "batch_size": p["batch_size"],
            "monitor": monitor,
            "interval": interval,
            "setting": name,
            "repeat": r,
        }
        for r in range(int(p["repeats"]))
        for s in systems
        for m in p["models"]
        for name, (monitor, interval) in (order if r % 2 == 0 else order[::-1])
    ]


def overheads(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per system × model × monitored setting: the pooled throughputs, the
    overhead against that system's and model's baseline and its 95% CI, the published
    overhead (NaN where none) and the status (``status_of``)."""
    from lab.experiments.systems import SYSTEMS
    from lab.metrics.overheads import overhead_table
    from lab.metrics.store import pool_runs

    pooled = pool_runs(summary, by=["system", "model", "setting"])
    table = overhead_table(pooled, within=("system", "model"))
    cols = ["system", "label", "model", "setting", "overhead", "overhead_ci", "published"]
    if table.empty:
        return pd.DataFrame(columns=[*cols, "status", "throughput", "baseline_throughput"])
    paper = dict(zip(published()["setting"], published()["value"], strict=True))
    table["label"] = table["system"].map(lambda s: SYSTEMS[s].label if s in SYSTEMS else s)
    table["published"] = table["setting"].map(lambda s: paper.get(s, math.nan))
    table["status"] = [
        status_of(r.overhead, r.overhead_ci, r.published).value for r in table.itertuples()
    ]
    return table[[*cols, "status", "throughput", "baseline_throughput"]]


def published() -> pd.DataFrame:
    """The paper's overheads, derived from its Fig 8 throughputs (the one table)."""
    from lab.experiments.published import published_table
    from lab.metrics.published import derived_overheads

    return derived_overheads(published_table(paper=KUNGFU_OSDI20, figure=FIGURE), BASELINE)


def published_throughputs() -> pd.DataFrame:
    """The throughputs the paper prints for Fig 8 (what the overheads derive from)."""
    from lab.experiments.published import published_table

    return published_table(paper=KUNGFU_OSDI20, figure=FIGURE)


def figure(
    table: pd.DataFrame, caption: str | None = None, workers: Any = None, batch_size: Any = None
) -> Any:
    """Overhead per setting, the lab's (with CI) beside the paper's derived ones."""
    from lab.metrics import figures

    several = table[["system", "model"]].drop_duplicates().shape[0] > 1 if len(table) else False
    df = table.assign(setting=table["label"] + " · " + table["model"] + " · " + table["setting"])
    title = "Monitoring overhead"
    if workers is not None and batch_size is not None:
        title += f", {workers} workers, batch {batch_size} per worker"
    return figures.overhead_bars(
        df if several else table, published=published(), caption=caption, title=title
    )


def status_of(overhead: float, ci: float, published: float) -> Status:
    """The rule in the module docstring, for one setting."""
    if any(v is None or math.isnan(v) for v in (overhead, ci, published)):
        return Status.NOT_RESOLVED
    low, high = overhead - ci, overhead + ci
    if not low <= published <= high:
        return Status.NOT_REPRODUCED
    if low <= 0.0 <= high:
        return Status.NOT_RESOLVED
    return Status.REPRODUCED


def combined(statuses: Sequence[Status]) -> Status:
    """The figure's status from its settings' (module docstring)."""
    for worst in (Status.NOT_REPRODUCED, Status.NOT_RESOLVED):
        if worst in statuses:
            return worst
    return Status.REPRODUCED


def verdict(
    table: pd.DataFrame, scale: str, runs: Sequence[str] = (), hardware: str | None = None
) -> Verdict:
    """Fig 8's verdict: every setting's status (``why`` lists them), headed by the setting
    with the paper's largest overhead.

    Raises:
        NothingMeasured: no monitored setting has an overhead with a published value.
    """
    rows = table.dropna(subset=["overhead", "published"]) if len(table) else table
    if rows.empty:
        raise NothingMeasured(f"KungFu {FIGURE}: no monitored setting has a measured overhead")
    head = rows.loc[rows["published"].idxmax()]
    why = "; ".join(
        f"{r.label}, {r.model}, {r.setting}: {_pct(r.overhead, r.overhead_ci)} vs "
        f"{r.published:.1%} published → {r.status}"
        for r in rows.itertuples()
    )
    source = str(published().set_index("setting").loc[head["setting"], "source"])
    ci = None if math.isnan(head["overhead_ci"]) else 100 * float(head["overhead_ci"])
    return Verdict(
        paper=KUNGFU_OSDI20,
        figure=FIGURE,
        claim=f"online monitoring costs little throughput (headline: {head['setting']})",
        status=combined([Status(s) for s in rows["status"]]),
        lab_value=100 * float(head["overhead"]),
        lab_ci=ci,
        published_value=100 * float(head["published"]),
        published_source=source,
        unit="% of throughput lost",
        scale=scale,
        hardware=where(runs) if hardware is None else hardware,
        why=why + ".",
        runs=tuple(runs),
    )


def _pct(v: float, ci: float) -> str:
    return f"{v:.1%}" + ("" if math.isnan(ci) else f" ± {ci:.1%}")
