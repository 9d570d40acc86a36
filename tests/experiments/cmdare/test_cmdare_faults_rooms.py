"""The revocation and PS-bottleneck rooms: shipped data against the published rows, point
checks before launch, and verdicts computed from tables."""

from __future__ import annotations

import pandas as pd
import pytest

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.cmdare import bottleneck, data, revocation
from lab.experiments.cmdare import bottleneck_report as breport
from lab.experiments.cmdare import revocation_report as rreport
from lab.experiments.cmdare.published import PUBLISHED
from lab.experiments.verdicts import Status


def test_shipped_cluster_speed_runs_match_the_published_curves() -> None:
    runs = data.cluster_speed("res15").set_index(["ps", "workers"])["median"]
    pub = {(int(p.setting.split()[0]), p.workers): p.value
           for p in PUBLISHED if p.figure == "PS bottleneck"}  # fmt: skip
    assert len(pub) == 16 and set(pub) == set(runs.index)
    gaps = {k: abs(runs[k] / v - 1) for k, v in pub.items()}
    assert max(gaps.values()) < 0.03, gaps


def test_chief_rejoining_runs_and_the_published_line() -> None:
    line, runs = rreport.published_chief()
    assert list(line["since"]) == [1500, 2000, 2500, 3000, 3500]
    assert len(runs) == 7 and set(runs["since_checkpoint"]) == {1500, 2000, 2500, 3000, 3500}
    assert (data.chief_rejoining()["steps"] >= 24000).all()


def test_points_are_checked_before_launch() -> None:
    pts = revocation.points(["cold"], [30], ["tiny_cnn"])
    assert [p["kind"] for p in pts] == ["worker", "chief", "checkpoint"]
    with pytest.raises(ParameterError):
        revocation.points(["hot"], [], [])
    with pytest.raises(ParameterError):
        revocation.points([], [600], [])  # not before the next checkpoint (every 600)
    with pytest.raises(ParameterError):
        revocation.check_cluster("local")
    assert [(p["workers"], p["ps"]) for p in bottleneck.points([3], [2])] == [(1, 2), (3, 2)]
    with pytest.raises(ParameterError):
        bottleneck.points([0], [1])


def _table(one_ps_speed: float, ps_cpu: float) -> pd.DataFrame:
    rows = []
    for ps, speeds in ((1, (2.0, 3.0, one_ps_speed)), (2, (2.0, 3.9, 5.6))):
        for w, s in enumerate(speeds, 1):
            cpu = ps_cpu if ps == 1 else 0.5
            rows.append({"workers": w, "ps": ps, "speed": s, "ps_cpu_util": cpu,
                         "ps_throttled": 0.4, "ps_link_util": 0.3, "ps_mbit": 9.0,
                         "worker_cpu_util": 0.6, "chief_cpu_util": 0.2,
                         "run_dir": f"r{ps}{w}"})  # fmt: skip
    df = pd.DataFrame(rows)
    df["predicted"] = 2.0 * df["workers"]
    df["ratio"] = df["speed"] / df["predicted"]
    df["bottleneck"] = [bottleneck.bottleneck(r) for _, r in df.iterrows()]
    return df


def test_bottleneck_is_named_from_the_busiest_saturated_resource() -> None:
    table = _table(3.1, 0.97)
    assert table.loc[(table.ps == 1) & (table.workers == 3), "bottleneck"].item() == "PS CPU"
    assert table.loc[(table.ps == 2) & (table.workers == 1), "bottleneck"].item() == "none (scales)"
    v = breport.verdict(table)
    assert v.status is Status.REPRODUCED and v.lab_value == pytest.approx(5.6 / 3.1)
    assert v.published_value == pytest.approx(70.4 / 62.1) and "PS CPU" in v.why
    workers_bound = _table(3.1, 0.5)  # slow, and the workers are the most used
    assert workers_bound.loc[2, "bottleneck"] == "worker CPU (below 80%)"
    assert breport.verdict(workers_bound).status is Status.NOT_REPRODUCED
    with pytest.raises(NothingMeasured):
        breport.verdict(table[table.ps == 1])


def test_chief_verdict_needs_three_points_and_a_rising_line() -> None:
    lab = pd.DataFrame({"since": [30, 75, 120], "overhead_s": [10.0, 11.5, 13.0],
                        "rate_before": [30.0] * 3, "run_dir": ["a", "b", "c"]})  # fmt: skip
    v = rreport.chief_verdict(lab)
    assert v.status is Status.REPRODUCED and v.lab_value == pytest.approx(1.0)
    assert v.published_value == pytest.approx(0.1175 * 24000 / 1359, rel=0.02)
    flat = lab.assign(overhead_s=[12.0, 10.0, 12.5])
    assert rreport.chief_verdict(flat).status is Status.NOT_REPRODUCED
    with pytest.raises(NothingMeasured):
        rreport.chief_verdict(lab.iloc[:2])


def test_chief_verdict_fits_the_redone_steps_not_the_restart_spread() -> None:
    """The restart's spread hides the rise of the whole overhead; its redone part shows it."""
    lab = pd.DataFrame({"since": [30, 150, 280], "restart_s": [13.4, 11.3, 12.2],
                        "redo_s": [0.6, 2.6, 5.1], "rate_before": [55.0] * 3,
                        "run_dir": ["a", "b", "c"]})  # fmt: skip
    lab["overhead_s"] = lab["restart_s"] + lab["redo_s"]
    assert rreport.chief_verdict(lab.drop(columns=["restart_s", "redo_s"])).status is (
        Status.NOT_REPRODUCED
    )  # the whole overhead: R² below the bar
    v = rreport.chief_verdict(lab)
    assert v.status is Status.REPRODUCED and "restart 11.3–13.4 s" in v.why
    assert "R² is 1.00" in v.precision_sentence()


def test_a_chief_run_ends_soon_after_it_is_back_where_it_was() -> None:
    """The ps chief schedules (warm-up + steps) x workers global steps: enough to get back
    to checkpoint + since and ``chief_after`` beyond, not many more."""
    smoke = revocation.SCALES["smoke"]
    for since in (25, 125, 225):
        steps = revocation.chief_steps({"scale": "smoke", "since": since}, 2)
        scheduled = (steps + revocation.WARMUP) * 2
        needed = smoke["checkpoint_every"] + since + smoke["chief_after"]
        assert needed <= scheduled <= needed + 2


def _worker_effects(recovered: list[float], ci: list[float]) -> pd.DataFrame:
    n = len(recovered)
    return pd.DataFrame({"mode": ["cold", "warm"][:n], "rate_before": [70.0] * n,
                         "lowest": [45.0] * n, "dip": [0.36] * n, "recovery_s": [4.0] * n,
                         "steps_lost": [120.0] * n, "recovered": recovered,
                         "recovered_ci": ci, "replaced_s": [1.1] * n,
                         "rejoined_s": [2.0] * n, "run_dir": ["a", "b"][:n]})  # fmt: skip


def test_worker_verdict_judges_the_pooled_interval_against_95_percent() -> None:
    """The runs are judged on their pooled interval: one 2-s window reaching 95% proves
    nothing, and one run straddling 95% is not the system's failure."""
    assert rreport.worker_verdict(_worker_effects([1.0, 0.99], [0.03, 0.04])).status is (
        Status.REPRODUCED
    )
    # the warm run alone straddles 95%; pooled: 99% ± 3.4%
    rescued = rreport.worker_verdict(_worker_effects([1.0, 0.98], [0.03, 0.06]))
    assert rescued.status is Status.REPRODUCED and "98% ± 6% of the rate before" in rescued.why
    assert rescued.lab_value == pytest.approx(99) and rescued.lab_ci == pytest.approx(3.354, 1e-3)
    straddles = rreport.worker_verdict(_worker_effects([0.97, 0.96], [0.05, 0.05]))
    assert straddles.status is Status.NOT_RESOLVED and "pooled over the 2 runs" in straddles.why
    # one run wholly below 95% is not hidden by a better one
    below = rreport.worker_verdict(_worker_effects([1.2, 0.87], [0.02, 0.05]))
    assert below.status is Status.NOT_REPRODUCED
    assert below.lab_value == pytest.approx(103.5)
    # the outside load is said, not judged: the share compares both workers in the same
    # seconds (make run #15: 0.20 -> 0.12 and 0.07 -> 0.15 cores)
    moved = _worker_effects([1.01, 0.99], [0.03, 0.03]).assign(
        outside_before=[0.199, 0.066], outside_after=[0.118, 0.154]
    )
    v = rreport.worker_verdict(moved)
    assert v.status is Status.REPRODUCED
    assert "fell from 0.20 to 0.12 cores" in v.why and "rose from 0.07 to 0.15 cores" in v.why
    # make run #27's warm run: 76% as the rates came, 100% at the survivor's pace
    run27 = _worker_effects([0.981, 0.999], [0.028, 0.035]).assign(
        rates=[0.957, 0.761], rates_ci=[0.060, 0.057]
    )
    v = rreport.worker_verdict(run27)
    assert v.status is Status.REPRODUCED and v.lab_value == pytest.approx(99.0)
    assert "(as the rates came, 76% ± 6%: the survivor ran at 76% of its own pace)" in v.why
    stalled = _worker_effects([1.0, 1.0], [0.01, 0.01]).assign(lowest=[0.0, 45.0])
    assert rreport.worker_verdict(stalled).status is Status.NOT_REPRODUCED
    never = _worker_effects([float("nan")], [float("nan")]).assign(rejoined_s=[float("nan")])
    v = rreport.worker_verdict(never)
    assert v.status is Status.NOT_RESOLVED and "ended before it took part" in v.why
    assert v.lab_value is None
