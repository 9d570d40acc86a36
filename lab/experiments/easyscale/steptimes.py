"""Step times of a workload on a device type holding k ESTs: the simulator's only speed source.

A table has one row per measurement: ``workload``, ``device_type``, ``ests_per_device`` and
``step_seconds`` — the wall time of one training step of a device that runs its k ESTs one
after another (k mini-batches per step), as EST run directories give it
(``throughput_table``) or as the lab's stand-in runs give it (``standin_table``). An
optional ``batch_size`` column holds the per-EST batch size of the measurement; a job then
uses the rows measured nearest to its own batch size (no rescaling by batch size).

Where the table lacks the k a placement needs, the step time is read from the measured
ks, never from a typed-in speed: linear between the two nearest measured ks, and beyond
the measured range the per-EST time of the nearest measured k times k (ESTs on one device
run one after another). ``read_artifact_logs`` reads step times kept in the EasyScale
artifact's per-workload ``logs.json`` layout, for a user who has those logs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from lab.errors import ParameterError

COLUMNS = ("workload", "device_type", "ests_per_device", "step_seconds")


class StepTimes:
    """Lookups of step seconds in a table of measured step times.

    Args:
        table: a DataFrame with ``COLUMNS`` (and optionally ``batch_size``); repeated
            measurements of one (workload, device type, k[, batch size]) are averaged.
    """

    def __init__(self, table: pd.DataFrame) -> None:
        missing = [c for c in COLUMNS if c not in table.columns]
        if missing:
            raise ParameterError("table", list(table.columns), f"columns {', '.join(COLUMNS)}")
        df = table.dropna(subset=list(COLUMNS)).copy()
        if df.empty:
            raise ParameterError("table", "no rows", "at least one measured step time")
        df["ests_per_device"] = df["ests_per_device"].astype(int)
        df["step_seconds"] = df["step_seconds"].astype(float)
        bad = df[(df["step_seconds"] <= 0) | (df["ests_per_device"] < 1)]
        if len(bad):
            row = bad.iloc[0]
            raise ParameterError(
                "table", row.to_dict(), "step_seconds > 0 and ests_per_device >= 1"
            )
        self.has_batch = "batch_size" in df.columns and df["batch_size"].notna().all()
        keys = ["workload", "device_type", *(["batch_size"] if self.has_batch else [])]
        self.frame = df.groupby([*keys, "ests_per_device"], as_index=False)["step_seconds"].mean()
        self._curves: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        for key, group in self.frame.groupby(keys):
            g = group.sort_values("ests_per_device")
            self._curves[key] = (
                g["ests_per_device"].to_numpy(float),
                g["step_seconds"].to_numpy(float),
            )
        self._cache: dict[tuple, float] = {}

    @property
    def workloads(self) -> list[str]:
        return sorted(self.frame["workload"].unique())

    def device_types(self, workload: str) -> list[str]:
        """The device types the table has measurements of ``workload`` on."""
        return sorted(self.frame.loc[self.frame["workload"] == workload, "device_type"].unique())

    def check(self, workloads: Iterable[str], device_types: Iterable[str]) -> None:
        """Refuse workloads or (workload, device type) pairs the table has no rows for."""
        types = list(device_types)
        for w in sorted(set(workloads)):
            if w not in self.workloads:
                raise ParameterError(
                    "workload", w, f"a workload of the step-time table: {', '.join(self.workloads)}"
                )
            have = self.device_types(w)
            for t in types:
                if t not in have:
                    raise ParameterError(
                        "device_type", t, f"a device type measured for {w}: {', '.join(have)}"
                    )

    def _batch_key(self, workload: str, device_type: str, batch_size: int | None) -> tuple:
        if not self.has_batch:
            return (workload, device_type)
        sizes = sorted(b for (w, t, b) in self._curves if w == workload and t == device_type)
        want = math.log(batch_size) if batch_size else 0.0
        nearest = min(sizes, key=lambda b: (abs(math.log(b) - want), b))
        return (workload, device_type, nearest)

    def seconds(
        self, workload: str, device_type: str, ests: int, batch_size: int | None = None
    ) -> float:
        """Step seconds of one device of ``device_type`` holding ``ests`` ESTs of ``workload``."""
        key = (workload, device_type, ests, batch_size)
        if key not in self._cache:
            ks, ts = self._curves[self._batch_key(workload, device_type, batch_size)]
            self._cache[key] = _read_curve(ks, ts, ests)
        return self._cache[key]


def _read_curve(ks: np.ndarray, ts: np.ndarray, k: int) -> float:
    """The step time at k from measured (k, seconds) points (see the module docstring)."""
    if k < ks[0]:
        return float(ts[0] / ks[0] * k)
    if k > ks[-1]:
        return float(ts[-1] / ks[-1] * k)
    return float(np.interp(k, ks, ts))


def read_artifact_logs(
    directory: str | Path, device_types: Sequence[str] = ("v100", "p100", "t4")
) -> pd.DataFrame:
    """A step-time table from ``<directory>/<workload>/logs.json`` files.

    The layout is the one EasyScale's simulator reads (its logs were not published): per
    batch size, ``step1`` lists one record per device type, in ``device_types`` order, whose
    ``total_time`` is the seconds of one mini-batch on one device (one EST per device).

    Returns:
        A table with ``COLUMNS`` and ``batch_size``, ests_per_device 1.
    """
    root = Path(directory)
    files = sorted(root.glob("*/logs.json"))
    if not files:
        raise ParameterError("directory", str(root), "a folder holding <workload>/logs.json")
    rows = []
    for path in files:
        logs = json.loads(path.read_text())
        for batch, entry in logs.items():
            for device_type, rec in zip(device_types, entry.get("step1", []), strict=False):
                seconds = rec.get("total_time") if isinstance(rec, dict) else None
                if seconds:
                    rows.append(
                        {
                            "workload": path.parent.name,
                            "device_type": device_type,
                            "ests_per_device": 1,
                            "batch_size": int(batch),
                            "step_seconds": float(seconds),
                        }
                    )
    return pd.DataFrame(rows, columns=[*COLUMNS, "batch_size"])
