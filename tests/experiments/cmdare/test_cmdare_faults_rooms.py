"""The revocation and PS-bottleneck rooms: shipped data against the published rows, point
checks before launch, and verdicts computed from tables."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.cmdare import bottleneck, data, revocation, revocation_tables
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


def test_one_chief_run_revokes_the_chief_after_successive_checkpoints() -> None:
    """since 25, 125, 225: revoked at global steps 275, 625 and 975, i.e. after 275, 650
    and 1125 step records (a redone step is printed again); the run schedules enough steps
    to get back past the last and for its count."""
    smoke = revocation.SCALES["smoke"]
    (point,) = [p for p in revocation.points([], [25, 125, 225], []) if p["kind"] == "chief"]
    assert revocation.sinces(point) == [25, 125, 225]
    plan = revocation.chief_revocations(point, smoke)
    assert [(r.host, r.at_step, r.replace) for r in plan] == [
        ("h4", 275, "cold"),
        ("h4", 650, "cold"),
        ("h4", 1125, "cold"),
    ]
    # the plan's check counts scheduled steps: the last count (1125) must fall within them
    scheduled = (revocation.chief_steps(point, 2) + revocation.WARMUP) * 2
    assert 3 * smoke["checkpoint_every"] + 225 + smoke["chief_after"] <= scheduled
    assert 1125 < scheduled <= 1125 + 2


def test_each_chief_revocation_is_read_from_its_own_rollback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two restarts in one run, 50 steps/s: revoked at global step 275 (checkpoint 250)
    and back 5 s later, revoked again at 625 (checkpoint 500) and back 7 s later."""
    import json

    import numpy as np

    t0 = 1_000.0
    times = [5.51, 17.51]
    (tmp_path / "events.jsonl").write_text("".join(
        json.dumps({"kind": "event", "event": "revoked", "host": "h4", "time": t0 + t}) + "\n"
        for t in times))  # fmt: skip
    parts = [(np.arange(1, 276), 0.0, 0), (np.arange(251, 626), 10.0, 250),
             (np.arange(501, 701), 22.0, 500)]  # fmt: skip
    rows = [(t0 + start + (g - base) * 0.02, float(g), float(g % 2))
            for gs, start, base in parts for g in gs]  # fmt: skip
    steps = pd.DataFrame(rows, columns=["ended_at", "global_step", "rank"])
    monkeypatch.setattr(revocation_tables, "steps_of", lambda run_dir: steps)
    summary = pd.DataFrame({"kind": ["chief"], "since": ["25+125"], "scale": ["smoke"],
                            "run_dir": [str(tmp_path)]})  # fmt: skip
    lab = rreport.chief_overheads(summary)
    assert list(lab["since"]) == [25, 125] and list(lab["planned_since"]) == [25, 125]
    assert lab["overhead_s"].to_numpy() == pytest.approx([4.99, 6.99], abs=0.02)
    assert lab["restart_s"].to_numpy() == pytest.approx([4.51, 4.51], abs=0.02)
    assert lab["rate_before"].to_numpy() == pytest.approx([50.0, 50.0], rel=0.05)


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
