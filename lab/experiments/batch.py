"""Whether this kernel runs a notebook in a batch (``make run``, papermill, CI) or for a
person, and the checks that make a batch run fail when it measured nothing.

The papermill runner (``lab.experiments.notebooks``) sets ``DISTLAB_BATCH=1`` for the
kernels it starts. In a batch, a failed sweep point, a figure that could not be drawn or a
verdict that could not be computed ends the notebook with an error (DESIGN.md, contract 7);
interactively a failed point is shown and the rest goes on, but a sweep with no succeeded
point fails everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from lab.errors import NothingMeasured

BATCH_ENV = "DISTLAB_BATCH"


def in_batch() -> bool:
    """True in a papermill/``make run``/CI execution."""
    return os.environ.get(BATCH_ENV, "") not in ("", "0", "false")


def require_measured(summary: Any, what: str, strict: bool | None = None) -> Any:
    """Return ``summary`` if it holds succeeded points; else raise NothingMeasured.

    Args:
        summary: a sweep's summary table (a ``state`` column per point).
        what: the experiment, for the message.
        strict: fail on any failed point too (default: in a batch).
    """
    strict = in_batch() if strict is None else strict
    if summary is None or len(summary) == 0 or "state" not in summary:
        raise NothingMeasured(f"{what}: the sweep ran no point")
    ok = summary["state"] == "succeeded"
    failed = summary[~ok]
    detail = "; ".join(_describe(row) for _, row in failed.head(8).iterrows())
    if not ok.any():
        raise NothingMeasured(f"{what}: no point succeeded ({detail})")
    if strict and len(failed):
        raise NothingMeasured(f"{what}: {len(failed)} of {len(summary)} points failed ({detail})")
    return summary


def _describe(row: Mapping[str, Any]) -> str:
    keys = ("system", "model", "workers", "setting", "policy", "schedule", "bandwidth")
    name = ", ".join(f"{k}={row[k]}" for k in keys if k in row and row[k] == row[k])
    where = row.get("run_dir") or "no run directory"
    return f"[{name}] {row.get('error') or row.get('state')} — {where}"
