"""The one table of published numbers: every paper room's ``published.PUBLISHED`` rows.

A room adds its numbers by defining ``PUBLISHED`` in ``lab/experiments/<paper>/published.py``
(or several ``published*.py`` modules); nothing else needs to change.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import Any

import pandas as pd

import lab.experiments as _experiments
from lab.metrics.published import COLUMNS, Published, to_frame


@cache
def all_rows() -> tuple[Published, ...]:
    """Every room's published rows, rooms in alphabetical order."""
    rows: list[Published] = []
    for room in sorted(m.name for m in pkgutil.iter_modules(_experiments.__path__) if m.ispkg):
        package = importlib.import_module(f"lab.experiments.{room}")
        for mod in sorted(m.name for m in pkgutil.iter_modules(package.__path__)):
            if mod.startswith("published"):
                rows.extend(importlib.import_module(f"{package.__name__}.{mod}").PUBLISHED)
    return tuple(rows)


def published_rows(**filters: Any) -> list[Published]:
    """The published numbers whose fields equal ``filters`` (e.g. ``figure="Fig 8"``)."""
    unknown = set(filters) - set(COLUMNS)
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}; fields: {', '.join(COLUMNS)}")
    return [p for p in all_rows() if all(getattr(p, k) == v for k, v in filters.items())]


def published_table(**filters: Any) -> pd.DataFrame:
    """``published_rows(**filters)`` as a DataFrame with one column per field."""
    return to_frame(published_rows(**filters))
