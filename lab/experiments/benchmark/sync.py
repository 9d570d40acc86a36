"""Synchronous SGD (the KungFu/Horovod/PS benchmark): the synchronous engines installed,
over a growing number of workers, with KungFu's published Fig 9 numbers for reference.

The benchmark itself publishes no number; the verdict compares the lab's KungFu with its
fastest Horovod at the largest worker count (``lab.experiments.evidence.ratio_status``:
reproduced when KungFu is faster with the ratio's whole 95% CI above 1), beside the ratio
of KungFu's and Horovod's published Fig 9 throughputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from lab.errors import NothingMeasured
from lab.experiments.evidence import best_ratio, ratio_status, succeeded, where
from lab.experiments.kungfu import fig9
from lab.experiments.verdicts import Status, Verdict

BENCHMARK = "KungFu/Horovod/PS benchmark"
EXPERIMENT = "benchmark/sync_sgd"
FIGURE = "sync SGD"
DEFAULTS: dict[str, dict[str, Any]] = {
    # smoke: the benchmark's own engines (KungFu, Horovod over Gloo and MPI); TF's
    # MultiWorkerMirroredStrategy (in no artifact) and KungFu's artifact script (Keras
    # applications at 224 px) at paper scale, to keep the notebook's time
    "smoke": {
        "systems": ["horovod-gloo", "horovod-mpi", "kungfu-sync"],
        "models": ["tiny_cnn"],
        "workers": [1, 2],
        "batch_size": 32,
    },
    "paper": {
        "systems": ["horovod-gloo", "horovod-mpi", "mwms", "kungfu-sync", "kungfu-artifact-sync"],
        "models": ["ResNet50", "MobileNetV2"],
        "workers": [1, 2, 4],
        "batch_size": 64,
    },
}
TABLE_COLUMNS = [
    "system",
    "label",
    "model",
    "workers",
    "throughput_per_rank",
    "throughput_per_rank_ci",
    "throughput_total",
    "throughput_total_ci",
    "efficiency",
]


def points(p: Mapping[str, Any], systems: Sequence[str]) -> list[dict[str, Any]]:
    from lab.experiments.points import grid

    return grid(
        system=list(systems),
        model=list(p["models"]),
        workers=list(p["workers"]),
        batch_size=p["batch_size"],
    )


def table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per succeeded point, with its scaling efficiency against the same system's
    smallest worker count (``total(N) / (N/n₀ × total(n₀))``)."""
    from lab.experiments.systems import SYSTEMS

    ok = succeeded(summary)
    if ok.empty:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    rows = []
    for (_system, _model), g in ok.groupby(["system", "model"], sort=False):
        g = g.sort_values("workers")
        n0, t0 = float(g["workers"].iloc[0]), float(g["throughput_total"].iloc[0])
        for _, r in g.iterrows():
            eff = r["throughput_total"] / (t0 * r["workers"] / n0) if t0 else float("nan")
            rows.append({**{c: r.get(c) for c in TABLE_COLUMNS}, "efficiency": eff})
    out = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    out["label"] = out["system"].map(lambda s: SYSTEMS[s].label if s in SYSTEMS else s)
    out["workers"] = out["workers"].astype(int)
    return out


def figure(rows: pd.DataFrame, caption: str | None = None, batch_size: Any = None) -> Any:
    """Per-worker throughput against workers, one line per system and model, each with
    its flat ideal (its smallest count's rate), and KungFu's published Fig 9 points."""
    from lab.metrics import figures

    df = rows.assign(series=rows["label"] + " · " + rows["model"])
    return figures.throughput_vs_workers(
        df,
        x="workers",
        color="series",
        per_worker=True,
        y="throughput_per_rank",
        error="throughput_per_rank_ci",
        y_title="img/s per worker",
        published=fig9.published(),
        title="Synchronous SGD" + (f", batch {batch_size} per worker" if batch_size else ""),
        caption=caption,
    )


def verdict(
    rows: pd.DataFrame, scale: str, runs: Sequence[str] = (), hardware: str | None = None
) -> Verdict:
    """KungFu over Horovod at the largest worker count (module docstring), with every
    system's scaling efficiency there in ``why``.

    Raises:
        NothingMeasured: no point succeeded.
    """
    if rows.empty:
        raise NothingMeasured(f"{BENCHMARK} {FIGURE}: no point succeeded")
    pub, source = fig9.published_ratio()
    top = rows[rows["workers"] == rows["workers"].max()]
    effs = ", ".join(f"{r.label} · {r.model} {r.efficiency:.0%}" for r in top.itertuples())
    words = f"scaling efficiency at {int(top['workers'].iloc[0])} workers: {effs}"
    common = {
        "paper": BENCHMARK,
        "figure": FIGURE,
        "claim": "KungFu's synchronous SGD outruns Horovod's",
        "published_value": pub,
        "published_source": f"KungFu (OSDI'20) Fig 9, for reference; {source}",
        "unit": "× (KungFu / Horovod throughput)",
        "scale": scale,
        "hardware": where(runs) if hardware is None else hardware,
        "runs": tuple(runs),
    }
    compared = best_ratio(rows, fig9.is_kungfu, fig9.is_horovod)
    if compared is None:
        why = f"KungFu and Horovod were not both measured; {words}."
        return Verdict(status=Status.NOT_MEASURED, why=why, **common)
    est, which = compared
    ci = None if est.ci != est.ci else est.ci
    return Verdict(
        status=ratio_status(est), lab_value=est.mean, lab_ci=ci, why=f"{which}; {words}.", **common
    )
