"""Traces and tables in the artifact's formats, the generator's shape, the published
rows' ratios, and the figures and verdicts built from a simulation."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.easyscale.published_trace import published_frame, published_ratios
from lab.experiments.easyscale.simulator import PAPER_CLUSTER, compare_policies, simulate
from lab.experiments.easyscale.steptimes import COLUMNS, StepTimes, read_artifact_logs
from lab.experiments.easyscale.trace import (
    TABLE1_WORKLOADS,
    generate_trace,
    read_trace,
    write_trace,
)
from lab.experiments.easyscale.trace_figures import (
    allocation_by_type,
    allocation_over_time,
    jct_makespan_bars,
    sweep_figure,
)
from lab.experiments.easyscale.trace_verdict import fig14_verdicts, fig15_verdict, ratio_table
from lab.experiments.saved import load_verdict
from lab.experiments.verdicts import Status

# The artifact's layout: a trailing comma in the header, an unnamed extra field, a
# repeated job name, a non-zero flag other than 1.
ARTIFACT_CSV = """name,time,application,max_parallelism,batch_size,epochs,\
enable_heterogeneous_deterministic,preferred_gpu,
bert-0,115,bert,16,8,4,40,v100,0.4
resnet50-7,916,resnet50,8,128,2,0,p100,0.2
resnet50-7,980,resnet50,4,128,2,0,t4,0.2
"""


def steps_table(workloads=TABLE1_WORKLOADS) -> pd.DataFrame:
    speeds = {"v100": 1.0, "p100": 1.6, "t4": 2.7}
    return pd.DataFrame(
        [
            {
                "workload": w,
                "device_type": t,
                "ests_per_device": k,
                "step_seconds": 0.1 * (1 + i / 4) * s * k,
            }
            for i, w in enumerate(workloads)
            for t, s in speeds.items()
            for k in (1, 2, 4)
        ]
    )


def test_read_trace_in_the_artifacts_format(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(ARTIFACT_CSV)
    trace = read_trace(path, samples_per_epoch={"bert": 1280, "resnet50": 10240})
    assert trace["name"].tolist() == ["bert-0", "resnet50-7", "resnet50-7~2"]
    assert trace["submit"].tolist() == [115.0, 916.0, 980.0]
    assert trace["ests"].tolist() == [16, 8, 4]
    assert trace["steps"].tolist() == [40, 20, 40]  # epochs × samples / (ests × batch)
    assert trace["heterogeneous"].tolist() == [True, False, False]
    assert trace["preferred"].tolist() == ["v100", "p100", "t4"]


def test_read_trace_names_a_workload_without_samples_per_epoch(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(ARTIFACT_CSV)
    with pytest.raises(ParameterError, match="resnet50"):
        read_trace(path, samples_per_epoch={"bert": 1280})


def test_written_trace_reads_back_the_same(tmp_path: Path) -> None:
    trace = generate_trace(steps_table(), seed=7, jobs=12)
    back = read_trace(write_trace(trace, tmp_path / "t.csv"))
    pd.testing.assert_frame_equal(back, trace, check_dtype=False)


def test_generated_trace_has_the_published_shape_and_is_seeded() -> None:
    table = steps_table()
    trace = generate_trace(table, seed=1)
    assert len(trace) == 68 and trace["submit"].between(0, 4800).all()
    assert set(trace["workload"]) == set(TABLE1_WORKLOADS)
    assert trace["ests"].between(1, 16).all() and trace["ests"].nunique() == 5
    pd.testing.assert_frame_equal(trace, generate_trace(table, seed=1))
    assert not trace.equals(generate_trace(table, seed=2))


def test_artifact_logs_become_a_table(tmp_path: Path) -> None:
    (tmp_path / "bert").mkdir()
    logs = {"32": {"step1": [{"total_time": 0.2}, {"total_time": 0.3}, {"total_time": 0.5}]}}
    (tmp_path / "bert" / "logs.json").write_text(json.dumps(logs))
    df = read_artifact_logs(tmp_path)
    assert list(df.columns[:4]) == list(COLUMNS)
    assert df.set_index("device_type")["step_seconds"].to_dict() == {
        "v100": 0.2,
        "p100": 0.3,
        "t4": 0.5,
    }
    assert StepTimes(df).seconds("bert", "t4", 2, batch_size=32) == pytest.approx(1.0)


def test_published_ratios_come_from_the_published_rows() -> None:
    ratios = published_ratios().set_index(["numerator", "quantity"])["ratio"].round(2)
    assert ratios[("YARN-CS", "mean_jct")] == 13.16
    assert ratios[("YARN-CS", "makespan")] == 2.76
    assert ratios[("EasyScale-homo", "mean_jct")] == 1.58
    assert ratios[("EasyScale-homo", "makespan")] == 1.12
    assert published_frame()["source"].str.contains("Fig 14").all()


@pytest.fixture(scope="module")
def simulated():
    table = steps_table()
    trace = generate_trace(table, seed=1, jobs=40, span_s=2400)
    return compare_policies(trace, table, PAPER_CLUSTER)


def test_verdicts_are_computed_from_the_simulation(simulated) -> None:
    summary, results = simulated
    table = ratio_table(summary)
    assert len(table) == 4
    yarn_jct = summary.set_index("policy").loc[["YARN-CS", "EasyScale-heter"], "mean_jct"]
    row = table[(table["numerator"] == "YARN-CS") & (table["quantity"] == "mean_jct")].iloc[0]
    assert row["lab"] == pytest.approx(yarn_jct.iloc[0] / yarn_jct.iloc[1])
    verdicts = fig14_verdicts(summary, "smoke", "test table")
    for v in verdicts:
        want = Status.REPRODUCED if v.lab_value >= 1.05 else v.status
        assert v.status == want and v.published_value > 1
    flipped = summary.assign(mean_jct=summary["mean_jct"][::-1].to_numpy())
    assert fig14_verdicts(flipped, "smoke", "x")[0].status == Status.NOT_REPRODUCED
    fig15 = fig15_verdict({k: r.allocation for k, r in results.items()}, "smoke", "x")
    assert fig15.lab_value > 0 and "heter" in fig15.sentence()
    with pytest.raises(NothingMeasured):
        fig14_verdicts(summary.iloc[0:0], "smoke", "x")


def test_fig14_by_visit_is_judged_by_the_interval_over_visits(simulated) -> None:
    """Visits that agree resolve the direction even under the tie band; visits that
    disagree leave it not resolved, whatever the whole table's point says."""
    summary, _ = simulated
    point = fig14_verdicts(summary, "smoke", "x")
    agree = fig14_verdicts(summary, "smoke", "x", by_visit=[summary, summary, summary])
    for p, v in zip(point, agree, strict=True):
        assert v.lab_value == pytest.approx(p.lab_value) and v.lab_ci == pytest.approx(0.0)
        want = Status.REPRODUCED if v.lab_value > 1 else Status.NOT_REPRODUCED
        assert v.status == want and "over 3 visits" in v.why
    flipped = summary.assign(mean_jct=summary["mean_jct"][::-1].to_numpy())
    split = fig14_verdicts(summary, "smoke", "x", by_visit=[summary, flipped])
    assert split[0].status == Status.NOT_RESOLVED and split[0].lab_ci > 0
    assert fig14_verdicts(summary, "smoke", "x", by_visit=[summary])[0].lab_ci is None


def test_figures_show_the_lab_beside_the_paper(simulated) -> None:
    summary, results = simulated
    fig = jct_makespan_bars(summary, caption="smoke")
    names = {t.name for t in fig.data}
    assert names == {"lab (simulated)", "paper (Fig 14)"}
    pub = next(t for t in fig.data if t.name == "paper (Fig 14)")
    assert list(pub.y) == [8904.9685, 1070.5008, 676.7497]
    notes = {a.name: a.text for a in fig.layout.annotations}
    assert "Fig 14" in pub.hovertemplate and "Fig 14" in notes["sources"]
    allocs = {k: r.allocation for k, r in results.items()}
    assert len(allocation_over_time(allocs).data) == 3
    assert len(allocation_by_type(allocs).data) == 9
    sweep = pd.concat([summary.assign(interval_s=60.0), summary.assign(interval_s=120.0)])
    assert len(sweep_figure(sweep, "interval_s").data) == 6
    assert len(sweep_figure(sweep.assign(cluster="a"), "cluster").data) == 6


def test_one_simulated_allocation_never_exceeds_the_cluster(simulated) -> None:
    _, results = simulated
    for r in results.values():
        per_type = r.allocation.pivot(index="time", columns="device_type", values="devices")
        for t, n in PAPER_CLUSTER.items():
            assert per_type[t].max() <= n


def test_a_bad_interval_is_refused() -> None:
    table = steps_table()
    trace = generate_trace(table, seed=1, jobs=3)
    with pytest.raises(ParameterError, match="interval_s"):
        simulate(trace, table, PAPER_CLUSTER, interval_s=0)


def test_fig14_claims_are_saved_as_one_figure(simulated, tmp_path: Path) -> None:
    from lab.experiments import conclude

    summary, _ = simulated
    conclude(fig14_verdicts(summary, "smoke", "x", runs=["r"]), "easyscale", results=tmp_path)
    saved = load_verdict("easyscale", "Fig 14", results=tmp_path)
    assert saved["figure"] == "Fig 14" and len(saved["claims"]) == 4
