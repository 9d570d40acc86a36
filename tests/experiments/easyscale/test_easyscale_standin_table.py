"""The stand-in step-time table, loaded from real (tiny) runs of torch_synthetic."""

from __future__ import annotations

import pandas as pd
import pytest

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.easyscale.simulator import simulate
from lab.experiments.easyscale.standin_table import (
    DeviceStandIn,
    WorkloadStandIn,
    measure,
    points,
    standin_table,
    startup_seconds,
)
from lab.experiments.easyscale.steptimes import COLUMNS, StepTimes


def test_points_share_runs_between_workloads_with_one_stand_in() -> None:
    ws = [WorkloadStandIn("bert", image_size=32), WorkloadStandIn("electra", image_size=32)]
    pts = points(ws, [DeviceStandIn("v100", cpu=1.0), DeviceStandIn("t4", cpu=0.35)], [1, 2])
    assert len(pts) == 4  # one stand-in config × 2 devices × 2 ks
    assert {p["device_cpu"] for p in pts} == {1.0, 0.35}


def test_nothing_measured_is_an_error(tmp_path) -> None:
    with pytest.raises(NothingMeasured):
        standin_table(results_root=tmp_path)
    with pytest.raises(ParameterError):
        measure(ests=(0,), results_root=tmp_path)


@pytest.mark.slow
def test_table_from_real_runs(tmp_path) -> None:
    """Two tiny local runs (1 and 2 micro-batches) become rows the simulator can use."""
    ws = [WorkloadStandIn("bert", "tiny_cnn", 32, 8), WorkloadStandIn("ncf", "tiny_cnn", 32, 8)]
    devices = [DeviceStandIn("v100", cpu=None, threads=1)]
    summary = measure(ws, devices, ests=(1, 2), steps=3, results_root=tmp_path)
    assert (summary["state"] == "succeeded").all()
    table = standin_table(ws, results_root=tmp_path)
    assert list(table.columns[:4]) == list(COLUMNS)
    assert len(table) == 4 and table["run_dir"].nunique() == 2
    assert (table["step_seconds"] > 0).all()
    assert table["measured_as"].str.contains("tiny_cnn 32×32").all()
    assert startup_seconds(results_root=tmp_path) > 0
    # measuring again finds the runs and starts nothing
    again = measure(ws, devices, ests=(1, 2), steps=3, results_root=tmp_path)
    assert (again["sweep_status"] == "skipped").all()
    trace = pd.DataFrame(
        [
            {
                "name": "j",
                "submit": 0.0,
                "workload": "ncf",
                "ests": 2,
                "batch_size": 8,
                "steps": 100,
                "heterogeneous": True,
                "preferred": "v100",
            }
        ]
    )
    r = simulate(trace, StepTimes(table), {"v100": 2}, "yarn-cs")
    ncf = table[table["workload"] == "ncf"].set_index("ests_per_device")["step_seconds"]
    assert r.jobs["finish"].iloc[0] == pytest.approx(100 * ncf[1])
