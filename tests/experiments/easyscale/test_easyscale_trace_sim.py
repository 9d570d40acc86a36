"""The trace simulator and its policies on tiny traces whose right schedule is known.

Step times are hand-made tables (a V100 stand-in takes 1 s per EST per step, a T4
stand-in 2 s), so every start and finish below can be worked out on paper.
"""

from __future__ import annotations

import pandas as pd
import pytest

from lab.errors import ParameterError
from lab.experiments.easyscale.policies import EasyScale, JobView, Speed
from lab.experiments.easyscale.simulator import PAPER_CLUSTER, compare_policies, makespan, simulate
from lab.experiments.easyscale.steptimes import StepTimes
from lab.experiments.easyscale.trace import TABLE1_WORKLOADS, generate_trace


def table(per_est: dict[str, float], workloads=("w",), ks=(1, 2, 4, 8)) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"workload": w, "device_type": t, "ests_per_device": k, "step_seconds": s * k}
            for w in workloads
            for t, s in per_est.items()
            for k in ks
        ]
    )


def job(name, submit, ests, steps, preferred="v100", heterogeneous=True, workload="w"):
    return {
        "name": name,
        "submit": submit,
        "workload": workload,
        "ests": ests,
        "batch_size": 32,
        "steps": steps,
        "heterogeneous": heterogeneous,
        "preferred": preferred,
    }


def by_name(result) -> pd.DataFrame:
    return result.jobs.set_index("name")


def test_yarn_cs_head_of_line_blocking() -> None:
    """C (1 EST) would fit beside A at t=60 but waits behind B (4 ESTs), which waits for A."""
    trace = pd.DataFrame([job("A", 0, 2, 120), job("B", 1, 4, 60), job("C", 2, 1, 60)])
    r = simulate(trace, table({"v100": 1.0}), {"v100": 4}, "yarn-cs", interval_s=60)
    jobs = by_name(r)
    assert jobs.loc["A", ["start", "finish"]].tolist() == [0, 120]
    assert jobs.loc["B", ["start", "finish"]].tolist() == [120, 180]
    assert jobs.loc["C", ["start", "finish"]].tolist() == [180, 240]
    assert jobs["jct"].tolist() == [120, 179, 238]
    assert r.mean_jct == pytest.approx((120 + 179 + 238) / 3)
    assert r.makespan == 240
    # at t=60 two devices stay idle although C needs one: the blocking is the policy's
    at60 = r.allocation[r.allocation["time"] == 60]["devices"].sum()
    assert at60 == 2


def test_easyscale_starts_what_yarn_blocks() -> None:
    trace = pd.DataFrame([job("A", 0, 2, 120), job("B", 1, 4, 60), job("C", 2, 1, 60)])
    yarn = simulate(trace, table({"v100": 1.0}), {"v100": 4}, "yarn-cs")
    easy = simulate(trace, table({"v100": 1.0}), {"v100": 4}, "easyscale-homo")
    assert by_name(easy).loc["C", "start"] == 60 < by_name(yarn).loc["C", "start"]
    assert easy.mean_jct < yarn.mean_jct


def test_homo_never_mixes_types_heter_does() -> None:
    """One V100 and three idle T4s: homo keeps the job on its V100; heter adds T4s and
    spreads the ESTs by speed (V100 2 ESTs = 2 s, each T4 1 EST = 2 s)."""
    trace = pd.DataFrame([job("A", 0, 4, 240)])
    steps = table({"v100": 1.0, "t4": 2.0})
    cluster = {"v100": 1, "t4": 3}
    homo = by_name(simulate(trace, steps, cluster, "easyscale-homo")).loc["A"]
    heter = by_name(simulate(trace, steps, cluster, "easyscale-heter")).loc["A"]
    assert homo["device_types"] == "v100" and homo["finish"] == 240 * 4.0
    assert heter["device_types"] == "t4+v100" and heter["finish"] == 240 * 2.0


def test_homo_never_mixes_on_a_generated_trace() -> None:
    steps = table({"v100": 1.0, "p100": 1.5, "t4": 2.5}, workloads=TABLE1_WORKLOADS)
    trace = generate_trace(steps, seed=3, jobs=30, span_s=1800)
    _, results = compare_policies(trace, steps, PAPER_CLUSTER)
    assert (results["EasyScale-homo"].jobs["mixed_instants"] == 0).all()
    assert (results["EasyScale-heter"].jobs["mixed_instants"] > 0).any()
    yarn = results["YARN-CS"].jobs
    assert (yarn["max_devices"] == yarn["ests"]).all()  # gang: one device per EST


def test_heter_uses_an_idle_slow_device() -> None:
    """Six ESTs on two V100s take 3 s a step; adding the two idle T4s (one EST each) makes
    it 2 s, so heter finishes 60 steps at 120 s where homo needs 180 s."""
    trace = pd.DataFrame([job("A", 0, 6, 60)])
    steps = table({"v100": 1.0, "t4": 2.0})
    cluster = {"v100": 2, "t4": 2}
    homo = simulate(trace, steps, cluster, "easyscale-homo")
    heter = simulate(trace, steps, cluster, "easyscale-heter")
    assert by_name(homo).loc["A", "finish"] == 180
    assert by_name(heter).loc["A", "finish"] == 120
    held = heter.allocation[heter.allocation["time"] == 0].set_index("device_type")["devices"]
    assert held.to_dict() == {"v100": 2, "t4": 2}
    assert Speed(StepTimes(steps)).split(
        JobView("A", 0, "w", 6, 32, True, "v100"), {"v100": 2, "t4": 2}
    ) == (("t4", 1), ("t4", 1), ("v100", 2), ("v100", 2))


def test_a_job_that_forbids_mixing_stays_on_one_type_under_heter() -> None:
    trace = pd.DataFrame([job("A", 0, 6, 60, heterogeneous=False)])
    r = simulate(trace, table({"v100": 1.0, "t4": 2.0}), {"v100": 2, "t4": 2}, "easyscale-heter")
    assert by_name(r).loc["A", "device_types"] == "v100"


def test_restart_costs_progress_and_interval_releases_devices() -> None:
    """A 1-EST job of 30 s with a 10 s restart on start finishes at 40 s; the next job,
    submitted at 5 s, starts at the next instant (60 s)."""
    trace = pd.DataFrame([job("A", 0, 1, 30), job("B", 5, 1, 30)])
    r = simulate(trace, table({"v100": 1.0}), {"v100": 1}, "easyscale-homo", restart_s=10)
    jobs = by_name(r)
    assert jobs.loc["A", "finish"] == 40 and jobs.loc["B", "start"] == 60
    assert jobs.loc["B", "finish"] == 100 and r.makespan == 100


def test_unknown_workload_is_refused_by_name() -> None:
    trace = pd.DataFrame([job("A", 0, 1, 10, workload="gpt3")])
    with pytest.raises(ParameterError, match="gpt3") as e:
        simulate(trace, table({"v100": 1.0}), {"v100": 1}, "yarn-cs")
    assert e.value.name == "workload" and e.value.value == "gpt3"


def test_device_type_missing_from_table_and_too_wide_jobs_are_refused() -> None:
    trace = pd.DataFrame([job("A", 0, 1, 10)])
    with pytest.raises(ParameterError, match="t4"):
        simulate(trace, table({"v100": 1.0}), {"v100": 1, "t4": 1}, "yarn-cs")
    wide = pd.DataFrame([job("A", 0, 4, 10)])
    with pytest.raises(ParameterError, match="ests"):
        simulate(wide, table({"v100": 1.0}), {"v100": 2}, "yarn-cs")


def test_jct_and_makespan_from_a_known_schedule() -> None:
    jobs = pd.DataFrame({"submit": [10.0, 20.0, 50.0], "finish": [70.0, 200.0, 110.0]})
    assert makespan(jobs) == 190.0
    assert (jobs["finish"] - jobs["submit"]).mean() == pytest.approx((60 + 180 + 60) / 3)


def test_step_times_between_and_beyond_measured_ests() -> None:
    st = StepTimes(
        pd.DataFrame(
            {
                "workload": ["w"] * 3,
                "device_type": ["v100"] * 3,
                "ests_per_device": [1, 2, 4],
                "step_seconds": [1.0, 1.8, 4.0],
            }
        )
    )
    assert st.seconds("w", "v100", 2) == 1.8
    assert st.seconds("w", "v100", 3) == pytest.approx(2.9)  # between 2 and 4
    assert st.seconds("w", "v100", 8) == pytest.approx(8.0)  # per-EST time at 4, times 8
    with pytest.raises(ParameterError):
        StepTimes(pd.DataFrame({"workload": ["w"], "device_type": ["v100"]}))


def test_growth_stops_when_devices_add_too_little() -> None:
    """Four ESTs: a second V100 halves the step; a third cannot (2+1+1 is still 2 s)."""
    trace = pd.DataFrame([job("A", 0, 4, 120)])
    r = simulate(trace, table({"v100": 1.0}), {"v100": 3}, EasyScale(False, min_gain=0.5))
    assert by_name(r).loc["A", "max_devices"] == 2
