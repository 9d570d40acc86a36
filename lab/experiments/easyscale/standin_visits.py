"""The stand-in step-time table once per visit, so a trace verdict can have an interval.

``lab.bench.torch_step_sweep`` visits every (input size, k) in rounds and tags each step
with its ``visit``; ``standin_table`` keeps one number per cell (the median of windows over
all visits). Here each visit gives a table of its own (the median of that visit's steady
timed steps per cell: the steps before a cell's steady state, found from its step times,
are left out), so the simulation can be run once per visit and a ratio such as Fig 14's
makespan ratio judged by its spread over visits, not from one point.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from lab.errors import NothingMeasured
from lab.experiments.easyscale.standin_table import SMOKE_WORKLOADS, WorkloadStandIn
from lab.metrics.shares import past_warmup


def visit_tables(
    table: pd.DataFrame, workloads: Sequence[WorkloadStandIn] = SMOKE_WORKLOADS
) -> list[pd.DataFrame]:
    """``table`` (``standin_table``'s) once per visit its runs share, ``step_seconds`` the
    median of that visit's timed steps of the cell; cells a visit lacks keep their
    table value.

    Raises:
        NothingMeasured: the table is not the stand-ins' (no ``run_dir``, or a workload
            without a stand-in: a paper-scale table), or its runs have no step tagged
            with a visit.
    """
    from lab.metrics.layout import read_manifest

    stand_in = {w.workload: w for w in workloads}
    if "run_dir" not in table or not set(table["workload"]) <= set(stand_in):
        raise NothingMeasured("the step-time table is not the stand-ins': no visits to read")
    per_cell: list[pd.DataFrame] = []
    for run_dir, rows in table.groupby("run_dir", sort=False):
        steps = _visit_steps(run_dir)
        if steps.empty:
            continue
        types = list(read_manifest(run_dir)["params"]["device_types"])
        medians = (
            steps.assign(device_type=[types[r] for r in steps["rank"]])
            .groupby([*_CELL, "visit"])["seconds"]
            .median()
            .rename("visit_seconds")
            .reset_index()
        )
        cells = rows.assign(
            image_size=[stand_in[w].image_size for w in rows["workload"]],
            micro_batches=rows["ests_per_device"].astype(int),
            batch_size=rows["batch_size"].astype(int),
        )
        per_cell.append(cells.merge(medians, on=list(_CELL), how="left"))
    found = pd.concat(per_cell) if per_cell else pd.DataFrame({"visit": []})
    if found["visit"].isna().all():
        raise NothingMeasured("no stand-in step is tagged with its visit")
    keys = ["workload", "device_type", "ests_per_device"]
    tables = []
    for visit in sorted(found["visit"].dropna().unique()):
        mine = found[found["visit"] == visit].set_index(keys)["visit_seconds"]
        t = table.set_index(keys)
        t["step_seconds"] = mine.reindex(t.index).fillna(t["step_seconds"])
        tables.append(t.reset_index()[table.columns])
    return tables


_CELL = ("device_type", "image_size", "batch_size", "micro_batches")
_INTS = ("rank", "image_size", "batch_size", "micro_batches", "visit")


def _visit_steps(run_dir: str) -> pd.DataFrame:
    """A run's steady timed steps with rank, cell and visit as integers (empty without
    visits): per rank and cell, the steps before ``steady_state_start`` of its series in
    step order are dropped (a first visit ran at ~twice its later step time on a 2-core
    container, its one untimed step not enough; its visit table then set the heter/homo
    makespan ratio apart from the others)."""
    from lab.metrics import load_run
    from lab.metrics.protocol import steady_state_start

    records = load_run(run_dir)
    if "visit" not in records:
        return pd.DataFrame()
    steps = past_warmup(records[records["kind"] == "step"], unflagged_is_warmup=True).copy()
    for col in (*_INTS, "step", "seconds"):
        steps[col] = pd.to_numeric(steps[col], errors="coerce")
    steps = steps.dropna(subset=list(_INTS)).astype({c: int for c in _INTS}).sort_values("step")
    cells = steps.groupby(["rank", *_CELL[1:]])
    cut = cells["seconds"].transform(lambda s: steady_state_start(s.tolist()))
    return steps[cells.cumcount() >= cut]


def summaries_by_visit(
    trace: pd.DataFrame, table: pd.DataFrame, cluster: object, interval_s: float, restart_s: float
) -> list[pd.DataFrame]:
    """The policies compared (``simulator.compare_policies``) on the same ``trace`` once
    per visit's table; empty where the table is not the stand-ins' (no visits)."""
    from lab.experiments.easyscale.simulator import compare_policies

    try:
        tables = visit_tables(table)
    except NothingMeasured:
        return []
    return [
        compare_policies(trace, t, cluster, interval_s=interval_s, restart_s=restart_s)[0]
        for t in tables
    ]
