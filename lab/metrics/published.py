"""The papers' published numbers, as data, each with where it was published.

These are facts about the papers, drawn beside what the lab measures (DESIGN.md, contract
6); they are never used as expectations of a measurement. Add a paper by appending
``Published`` rows; derived values (e.g. an overhead computed from two published
throughputs) say so in their source.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import pandas as pd

KUNGFU_OSDI20 = "KungFu (OSDI'20)"
_KUNGFU_README = "KungFu osdi20/README.md, osdi20-artifact branch (github.com/lsds/KungFu)"


@dataclass(frozen=True)
class Published:
    """One published number.

    Args:
        paper: the paper, e.g. "KungFu (OSDI'20)".
        figure: the figure or table it belongs to, e.g. "Fig 8".
        quantity: what it is: "throughput", "resize_time", "overhead" ...
        value: the number, in ``unit``.
        unit: e.g. "img/s per GPU", "s", "fraction".
        source: where it is published, precise enough to find it again.
        error: the published ± (its meaning in ``note``), if any.
        system: the system measured ("KungFu", "Horovod" ...).
        model: the model trained, if any.
        workers: number of workers (GPUs) it was measured with.
        batch_size: per-worker batch size.
        hardware: what it ran on.
        setting: the variant within the figure ("baseline", "noise scale", ...).
        per_worker: True when ``value`` is per worker (multiply by ``workers`` for total).
        note: anything a reader needs to interpret it.
    """

    paper: str
    figure: str
    quantity: str
    value: float
    unit: str
    source: str
    error: float | None = None
    system: str | None = None
    model: str | None = None
    workers: int | None = None
    batch_size: int | None = None
    hardware: str | None = None
    setting: str | None = None
    per_worker: bool = False
    note: str = ""


_FIG8 = {
    "paper": KUNGFU_OSDI20,
    "figure": "Fig 8",
    "quantity": "throughput",
    "unit": "img/s per GPU",
    "system": "KungFu",
    "model": "ResNet50",
    "workers": 4,
    "batch_size": 8,
    "hardware": "Azure VM, 4× NVIDIA K80 (the paper's figure used a DGX-1, 8× V100)",
    "per_worker": True,
    "source": f"{_KUNGFU_README}, §3.1 Monitoring Overhead (Figure 8)",
}
_FIG9 = {
    "paper": KUNGFU_OSDI20,
    "figure": "Fig 9",
    "quantity": "throughput",
    "unit": "img/s per GPU",
    "model": "ResNet50",
    "workers": 32,
    "batch_size": 32,
    "hardware": "32 Azure GPU VMs, 1 GPU each",
    "per_worker": True,
    "source": f"{_KUNGFU_README}, §3.2 Scalability (Figure 9)",
    "note": "± is the scripts' 1.96 × standard deviation over iterations on the master VM",
}
_FIG7 = {
    "paper": KUNGFU_OSDI20,
    "figure": "Fig 7",
    "quantity": "resize_time",
    "unit": "s",
    "system": "KungFu",
    "hardware": "2 Azure GPU VMs",
    "source": f"{_KUNGFU_README}, §3.3 Dynamic scaling (Figure 7)",
}

PUBLISHED: tuple[Published, ...] = (
    Published(**_FIG8, value=30.5, setting="baseline", note="sync-sgd, no monitoring"),
    Published(**_FIG8, value=29.1, setting="noise scale", note="gradient noise scale, interval 1"),
    Published(
        **_FIG8, value=24.3, setting="variance interval 1", note="gradient variance, interval 1"
    ),
    Published(
        **_FIG8, value=29.6, setting="variance interval 8", note="gradient variance, interval 8"
    ),
    Published(**_FIG9, value=43.4, error=1.2, system="KungFu", setting="sync-sgd"),
    Published(**_FIG9, value=12.7, error=0.7, system="Horovod", setting="Horovod 0.16.1"),
    Published(**_FIG7, value=20.39, workers=2, setting="resize 1→2"),
    Published(**_FIG7, value=0.04012, workers=1, setting="resize 2→1", note="printed as 40.12ms"),
)

COLUMNS = tuple(f.name for f in fields(Published))


def published_rows(**filters: Any) -> list[Published]:
    """The published numbers whose fields equal ``filters`` (e.g. ``figure="Fig 8"``)."""
    unknown = set(filters) - set(COLUMNS)
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}; fields: {', '.join(COLUMNS)}")
    return [p for p in PUBLISHED if all(getattr(p, k) == v for k, v in filters.items())]


def published_table(**filters: Any) -> pd.DataFrame:
    """``published_rows(**filters)`` as a DataFrame with one column per field."""
    return to_frame(published_rows(**filters))


def to_frame(rows: Any) -> pd.DataFrame:
    """A DataFrame of published numbers from rows, a DataFrame, or None (empty)."""
    if rows is None:
        return pd.DataFrame(columns=list(COLUMNS))
    if isinstance(rows, pd.DataFrame):
        return rows
    return pd.DataFrame(
        [asdict(r) if isinstance(r, Published) else dict(r) for r in rows], columns=list(COLUMNS)
    )


def derived_overheads(rows: Any, baseline: str = "baseline") -> pd.DataFrame:
    """Overheads ``1 − value/baseline`` derived from published throughputs of one figure.

    The result has the same columns, ``quantity="overhead"``, ``unit="fraction"``, and a
    source that says it is derived (the papers print throughputs, not these fractions).
    """
    df = to_frame(rows)
    base = df[df["setting"] == baseline]
    if len(base) != 1:
        raise ValueError(f"need exactly one row with setting={baseline!r}, found {len(base)}")
    ref = float(base["value"].iloc[0])
    out = df[df["setting"] != baseline].copy()
    out["value"] = 1.0 - out["value"].astype(float) / ref
    out["error"] = None
    out["quantity"] = "overhead"
    out["unit"] = "fraction"
    out["per_worker"] = False
    out["source"] = "derived from " + out["source"].astype(str) + f" (vs {baseline} {ref:g})"
    return out.reset_index(drop=True)
