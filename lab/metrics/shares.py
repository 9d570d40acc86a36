"""Steps an emulated host ran before its CPU share applied are warm-up, whatever the job said.

Emulated hosts start at full speed and get their shares at the job's first step record
(lab.cluster.emulation.startup). The launcher learns of that record from the rank's
output, which can arrive late: with the engines' default spin settings two ranks took
both cores of this machine and their first step record reached the launcher 1.5 s after
it was printed, by when every step had run at full speed (a host at 0.4 of a core
"used" 2.3 cores). The job's own warm-up count cannot guard against that, so a run is
read with the moment the shares applied (the manifest's ``cpu_shares``) and a step that
spent more than ``FULL_SPEED_SHARE`` of its time before it is flagged ``before_shares``
and treated as warm-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

FULL_SPEED_SHARE = 0.1  # a step's start may precede the shares by a tenth of its time


def shares_applied_at(manifest: Mapping[str, Any]) -> float | None:
    """Epoch seconds at which the hosts got their shares; None where the run had no full-speed
    start (not emulated, ``startup: share``) or the shares never applied."""
    shares = manifest.get("cpu_shares")
    if not isinstance(shares, Mapping) or shares.get("startup") != "full":
        return None
    if isinstance(shares.get("epoch"), (int, float)):
        return float(shares["epoch"])
    started = manifest.get("started")
    after = shares.get("after_s")
    if isinstance(started, Mapping) and isinstance(after, (int, float)):
        # Runs recorded before ``epoch`` was written: the gate's clock starts with the run.
        epoch = started.get("epoch")
        return float(epoch) + float(after) if isinstance(epoch, (int, float)) else None
    return None


def flag_before_shares(records: pd.DataFrame, manifest: Mapping[str, Any]) -> pd.DataFrame:
    """``records`` with ``before_shares`` set on step records that ran mostly at full speed,
    and those records' ``warmup`` set. Steps without an end time and a duration are left
    as they are: nothing says when they ran."""
    applied = shares_applied_at(manifest)
    needed = {"kind", "time", "seconds"}
    if applied is None or records.empty or not needed <= set(records.columns):
        return records
    out = records.copy()
    end = pd.to_numeric(out["time"], errors="coerce")
    seconds = pd.to_numeric(out["seconds"], errors="coerce")
    early = (applied - (end - seconds)) > FULL_SPEED_SHARE * seconds
    before = (out["kind"] == "step") & early.fillna(False) & (seconds > 0)
    out["before_shares"] = before
    if before.any():
        warm = out["warmup"] if "warmup" in out else pd.Series(pd.NA, index=out.index)
        out["warmup"] = warm.astype("boolean").mask(before, True)
    return out


def past_warmup(rows: pd.DataFrame, unflagged_is_warmup: bool = False) -> pd.DataFrame:
    """The rows of ``rows`` not flagged ``warmup`` (by the workload, or by
    ``flag_before_shares``), in their order.

    A row without the flag (missing, or no such column) is timed by default: engines flag
    their warm-up steps only. ``unflagged_is_warmup`` counts it as warm-up instead, for
    readers whose workload flags every step, so that a row without the flag is not one of
    its timed steps.
    """
    if "warmup" not in rows:
        return rows.iloc[0:0] if unflagged_is_warmup else rows
    flagged = rows["warmup"].astype("boolean").fillna(unflagged_is_warmup).astype(bool)
    return rows[~flagged]
