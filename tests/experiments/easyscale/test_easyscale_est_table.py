"""EasyScale Figs 14-15 at paper scale: the step-time table comes from real EST runs on
the cluster's GPU types, under the trace's names (its first rehearsal found the paper path
asking for run directories no lab function made, and the lab's model names not the
trace's)."""

from __future__ import annotations

import pandas as pd
import pytest

from lab.errors import ParameterError
from lab.experiments.easyscale import est_table
from lab.experiments.easyscale.simulator import PAPER_CLUSTER
from lab.experiments.easyscale.steptimes import StepTimes
from lab.experiments.easyscale.trace import TABLE1_WORKLOADS, generate_trace


def test_the_rehearsal_cluster_stands_for_every_gpu_of_the_papers_cluster() -> None:
    names = est_table.device_names("rehearsal")
    assert names == {"fast": "v100", "slow": "p100", "t4": "t4"}
    assert set(names.values()) == set(PAPER_CLUSTER)


def test_every_lab_model_is_a_table1_workload() -> None:
    from lab.bench.vision_models import NAMES

    assert set(est_table.TRACE_WORKLOADS) <= set(NAMES)
    assert set(est_table.TRACE_WORKLOADS.values()) <= set(TABLE1_WORKLOADS)


def test_a_table_of_est_runs_drives_a_trace_of_its_workloads() -> None:
    runs = pd.DataFrame(
        [
            {"workload": m, "device_type": d, "ests_per_device": 1, "step_seconds": s}
            for m in ("resnet50", "shufflenet_v2")
            for d, s in (("fast", 0.1), ("slow", 0.2), ("t4", 0.3))
        ]
    )
    table = est_table.renamed(runs, est_table.device_names("rehearsal"))
    assert set(table["workload"]) == {"resnet50", "shufflenetv2"}
    assert set(table["device_type"]) == set(PAPER_CLUSTER)
    workloads = est_table.trace_workloads(table)
    assert workloads == ["resnet50", "shufflenetv2"]  # Table 1's order
    trace = generate_trace(table, seed=0, workloads=workloads)
    assert set(trace["workload"]) == set(workloads)
    with pytest.raises(ParameterError, match="bert"):  # Table 1's eight: refused, named
        StepTimes(table).check(TABLE1_WORKLOADS, PAPER_CLUSTER)


def test_measuring_is_refused_before_anything_starts() -> None:
    with pytest.raises(ParameterError, match="device_types"):
        est_table.measure("local")
    with pytest.raises(ParameterError, match="models"):
        est_table.measure("rehearsal", models=["bert"])


def test_a_restart_cost_needs_a_run_with_a_step() -> None:
    from lab.errors import NothingMeasured
    from lab.experiments.easyscale.standin_runs import startup_of

    with pytest.raises(NothingMeasured, match="no EST run"):
        startup_of([], "no EST run to time a start-up from")
