"""Asynchronous SGD (the KungFu/Horovod/PS benchmark): KungFu's pair averaging (or the
lab's, on MPI one-sided communication) against TensorFlow parameter servers.

The benchmark publishes no number for asynchronous SGD (the published table has no row
for it, and the verdict says so, computed from that table). The status compares the
lab's fastest pair averaging with its parameter server at the largest worker count by
``lab.experiments.evidence.ratio_status``: reproduced when pair averaging is faster with
the ratio's whole 95% CI above 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from lab.errors import NothingMeasured
from lab.experiments.benchmark import sync
from lab.experiments.benchmark.sync import (
    BENCHMARK,  # the same grid: systems x models x workers
)
from lab.experiments.evidence import best_ratio, ratio_status, succeeded, where
from lab.experiments.verdicts import Status, Verdict

EXPERIMENT = "benchmark/async_sgd"
FIGURE = "async SGD"
PS = "ps"
PAIR_AVERAGING = ("pair-avg", "kungfu-async", "kungfu-artifact-async")
DEFAULTS: dict[str, dict[str, Any]] = {
    "smoke": {  # KungFu's artifact script trains Keras applications at 224 px: paper scale
        "systems": ["ps", "pair-avg", "kungfu-async"],
        "models": ["tiny_cnn"],
        "workers": [2],
        "batch_size": 32,
    },
    "paper": {
        "systems": ["ps", "pair-avg", "kungfu-async", "kungfu-artifact-async"],
        "models": ["ResNet50", "MobileNetV2"],
        "workers": [4],
        "batch_size": 64,
    },
}
TABLE_COLUMNS = [
    "system",
    "label",
    "model",
    "workers",
    "throughput_per_rank",
    "throughput_total",
    "throughput_total_ci",
]


points = sync.points  # the same grid as sync SGD: systems x models x workers


def table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per succeeded point, systems named as in the legend."""
    from lab.experiments.systems import SYSTEMS

    ok = succeeded(summary)
    out = pd.DataFrame([{c: r.get(c) for c in TABLE_COLUMNS} for _, r in ok.iterrows()])
    out = out.reindex(columns=TABLE_COLUMNS)
    out["label"] = out["system"].map(lambda s: SYSTEMS[s].label if s in SYSTEMS else s)
    return out


def published() -> pd.DataFrame:
    """The benchmark's published numbers for asynchronous SGD (it prints none)."""
    from lab.experiments.published import published_table

    return published_table(paper=BENCHMARK, figure=FIGURE)


def figure(rows: pd.DataFrame, caption: str | None = None, title: str = "") -> Any:
    """Total throughput per model, one bar per system."""
    from lab.metrics import figures

    return figures.grouped_bars(
        rows.assign(system=rows["label"]),
        x="model",
        y="throughput_total",
        error="throughput_total_ci",
        color="system",
        published=published(),
        title=title or "Asynchronous SGD",
        caption=caption,
        y_title="img/s (all workers)",
    )


def verdict(
    rows: pd.DataFrame, scale: str, runs: Sequence[str] = (), hardware: str | None = None
) -> Verdict:
    """Pair averaging over the parameter server (module docstring).

    Raises:
        NothingMeasured: no point succeeded.
    """
    if rows.empty:
        raise NothingMeasured(f"{BENCHMARK} {FIGURE}: no point succeeded")
    pub = published()
    none = "The benchmark publishes no number for asynchronous SGD; " if pub.empty else ""
    common = {
        "paper": BENCHMARK,
        "figure": FIGURE,
        "claim": "decentralised pair averaging outruns a parameter server",
        "published_value": None if pub.empty else float(pub["value"].iloc[0]),
        "published_source": None if pub.empty else str(pub["source"].iloc[0]),
        "unit": "× (pair averaging / parameter server throughput)",
        "scale": scale,
        "hardware": where(runs) if hardware is None else hardware,
        "runs": tuple(runs),
    }
    compared = best_ratio(rows, lambda s: s in PAIR_AVERAGING, lambda s: s == PS)
    if compared is None:
        why = f"{none}pair averaging and a parameter server were not both measured."
        return Verdict(status=Status.NOT_MEASURED, why=why, **common)
    est, which = compared
    ci = None if est.ci != est.ci else est.ci
    return Verdict(
        status=ratio_status(est), lab_value=est.mean, lab_ci=ci, why=f"{none}{which}.", **common
    )
