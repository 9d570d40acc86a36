"""The stand-in step-time table, loaded from real (tiny) runs of torch_synthetic."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.easyscale.simulator import simulate
from lab.experiments.easyscale.standin_table import (
    ROUNDS,
    DeviceStandIn,
    WorkloadStandIn,
    measure,
    points,
    standin_table,
    startup_seconds,
)
from lab.experiments.easyscale.standin_visits import visit_tables
from lab.experiments.easyscale.steptimes import COLUMNS, StepTimes


def test_points_measure_quota_devices_side_by_side_in_one_run() -> None:
    ws = [
        WorkloadStandIn("bert", image_size=32),
        WorkloadStandIn("electra", image_size=32),
        WorkloadStandIn("vgg19", image_size=48),
    ]
    devices = [
        DeviceStandIn("v100", cpu=1.0),
        DeviceStandIn("t4", cpu=0.35),
        DeviceStandIn("cpu", cpu=None, threads=2),
    ]
    pts = points(ws, devices, [2, 1])
    # one run for the two quota devices side by side, one for the device without a quota
    assert [p["device_types"] for p in pts] == [["v100", "t4"], ["cpu"]]
    assert pts[0]["device_cpus"] == [1.0, 0.35] and pts[1]["device_threads"] == [2]
    # workloads sharing a stand-in share its configuration; every size × k in each run
    assert all(p["image_sizes"] == [32, 48] and p["ests"] == [1, 2] for p in pts)


def test_nothing_measured_is_an_error(tmp_path) -> None:
    with pytest.raises(NothingMeasured):
        standin_table(results_root=tmp_path)
    with pytest.raises(NothingMeasured):
        startup_seconds(results_root=tmp_path)
    with pytest.raises(ParameterError):
        measure(ests=(0,), results_root=tmp_path)
    with pytest.raises(ParameterError):
        measure(devices=[DeviceStandIn("v100"), DeviceStandIn("v100")], results_root=tmp_path)


def test_a_table_that_is_not_the_stand_ins_has_no_visits() -> None:
    """A paper-scale table (no stand-in runs) falls back to one table, by name, not by
    any KeyError on the way."""
    paper = pd.DataFrame({"workload": ["bert"], "device_type": ["v100"],
                          "ests_per_device": [1], "step_seconds": [0.1]})  # fmt: skip
    with pytest.raises(NothingMeasured, match="not the stand-ins'"):
        visit_tables(paper)
    with pytest.raises(NothingMeasured, match="not the stand-ins'"):
        visit_tables(paper.assign(run_dir="r", workload="gpt-9"))


def test_a_visit_is_read_from_its_steady_steps(tmp_path) -> None:
    """A cell's slow start (its first visit at twice its later step time) is cut by the
    steady-state rule, not carried into that visit's table."""
    import json

    from lab.metrics.records import format_record

    slow_first = [0.08, 0.06, 0.07, 0.065] + [0.03, 0.031, 0.029, 0.03] * 3
    cell = {"warmup": False, "image_size": 32, "batch_size": 8, "micro_batches": 1}
    lines = [
        format_record("step", rank=0, step=i, seconds=x, visit=1 + i // 4, **cell)
        for i, x in enumerate(slow_first)
    ]
    (tmp_path / "rank-0.log").write_text("\n".join(lines) + "\n")
    (tmp_path / "manifest.json").write_text(json.dumps({"params": {"device_types": ["v100"]}}))
    table = pd.DataFrame(
        {"workload": ["bert"], "device_type": ["v100"], "ests_per_device": [1],
         "step_seconds": [0.05], "batch_size": [8], "run_dir": [str(tmp_path)]}
    )  # fmt: skip
    ws = [WorkloadStandIn("bert", image_size=32, batch_size=8)]
    visits = [float(v["step_seconds"].iloc[0]) for v in visit_tables(table, ws)]
    assert visits == [0.03, 0.03, 0.03]  # visits 2-4; visit 1 had no steady step


@pytest.mark.slow
def test_table_from_real_runs(tmp_path) -> None:
    """One tiny local run measures two sizes × two ks; its records become rows the
    simulator can use."""
    ws = [WorkloadStandIn("bert", "tiny_cnn", 32, 8), WorkloadStandIn("ncf", "tiny_cnn", 40, 8)]
    devices = [DeviceStandIn("v100", cpu=None, threads=1)]
    summary = measure(ws, devices, ests=(1, 2), seconds=0.2, results_root=tmp_path)
    assert (summary["state"] == "succeeded").all() and len(summary) == 1
    table = standin_table(ws, results_root=tmp_path)
    assert list(table.columns[:4]) == list(COLUMNS)
    assert len(table) == 4 and table["run_dir"].nunique() == 1
    assert (table["step_seconds"] > 0).all()
    assert set(table["measured_as"].str.split(",").str[0]) == {"tiny_cnn 32×32", "tiny_cnn 40×40"}
    assert startup_seconds(results_root=tmp_path) > 0
    # the same cells once per visit of the sweep's rounds, for an interval over visits
    visits = visit_tables(table, ws)
    # (a visit whose steps were all before a cell's steady state gives no table)
    assert ROUNDS // 2 <= len(visits) <= ROUNDS and all(len(v) == 4 for v in visits)
    assert all((v["step_seconds"] > 0).all() for v in visits)
    assert any(not v["step_seconds"].equals(table["step_seconds"]) for v in visits)
    # measuring again finds the run and starts nothing
    again = measure(ws, devices, ests=(1, 2), seconds=0.2, results_root=tmp_path)
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


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="emulated hosts need root")
def test_quota_devices_measured_side_by_side(tmp_path) -> None:
    """Two emulated hosts with different CPU quotas in one run, a rank each: the rank on
    the smaller quota measures the longer step."""
    ws = [WorkloadStandIn("resnet50", "tiny_cnn", 64, 16)]
    devices = [DeviceStandIn("v100", cpu=0.8), DeviceStandIn("t4", cpu=0.25)]
    summary = measure(ws, devices, ests=(1, 2), seconds=0.6, results_root=tmp_path)
    assert (summary["state"] == "succeeded").all() and int(summary["ranks"].iloc[0]) == 2
    table = standin_table(ws, results_root=tmp_path)
    assert len(table) == 4 and table["run_dir"].nunique() == 1
    step = table.set_index(["device_type", "ests_per_device"])["step_seconds"]
    assert step[("t4", 2)] > 1.5 * step[("v100", 2)]
    assert table["measured_as"].str.contains("0.25 core quota").sum() == 2
