"""The papers' published numbers, as data, each with where it was published.

These are facts about the papers, drawn beside what the lab measures (DESIGN.md, contract
6); they are never used as expectations of a measurement. This module holds the row type
and table helpers; the rows themselves live in each paper's room
(``lab.experiments.<paper>.published``) and are gathered into one table by
``lab.experiments.published``. Derived values (e.g. an overhead computed from two
published throughputs) say so in their source.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import pandas as pd


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


COLUMNS = tuple(f.name for f in fields(Published))


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
