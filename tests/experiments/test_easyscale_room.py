"""The EasyScale room: published rows, figure builders and verdicts computed from data."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest

from lab.errors import NothingMeasured, ParameterError
from lab.experiments import scale_parameters
from lab.experiments.catalog import FIGURES
from lab.experiments.easyscale import fig9, overhead, overhead_tables, published, runs, sharing
from lab.experiments.easyscale.runs import EST_LABEL
from lab.experiments.verdicts import Status


def test_every_published_row_names_the_paper_and_its_figure() -> None:
    assert len(published.rows("Fig 12")) == 4
    for row in published.PUBLISHED:
        assert "EasyScale (SC'23" in row.source and row.figure.split()[1] in row.source
    assert published.value("Fig 11", system="EasyScale").value == pytest.approx(0.0042)
    with pytest.raises(LookupError):
        published.value("Fig 13")  # two rows: ambiguous


def diff_frame(d0_equal: bool, d1_stage2_equal: bool, d12_equal: bool) -> pd.DataFrame:
    rows = []
    refs = (
        ("EasyScale D0", "DDP homo"),
        ("EasyScale D1", "DDP homo"),
        ("EasyScale D1+D2", "DDP heter"),
    )
    for config, ref in refs:
        for step in range(6):
            stage = step // 2
            equal = {
                "EasyScale D0": d0_equal or step == 0,
                "EasyScale D1": stage < 2 or d1_stage2_equal,
                "EasyScale D1+D2": d12_equal,
            }[config]
            rows.append(
                {
                    "config": config,
                    "reference": ref,
                    "step": step,
                    "stage": stage,
                    "loss": 2.0,
                    "loss_ddp": 2.0 if equal else 2.0 + 1e-7,
                    "difference": 0.0 if equal else 1e-7,
                    "bits_equal": equal,
                    "params_equal": equal,
                }
            )
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    ("d0_equal", "d12_equal", "status"),
    [
        (False, True, Status.REPRODUCED),
        (True, True, Status.NOT_REPRODUCED),
        (False, False, Status.NOT_REPRODUCED),
    ],
)
def test_fig9_verdict_follows_the_bits(d0_equal: bool, d12_equal: bool, status: Status) -> None:
    diff = diff_frame(d0_equal, d1_stage2_equal=False, d12_equal=d12_equal)
    assert fig9.verdict(diff, "smoke", "test").status is status
    assert isinstance(fig9.figure(diff), go.Figure)
    table = fig9.stage_table(diff)
    assert table.loc[table["config"] == "EasyScale D1", "losses_bit_equal"].tolist() == [2, 2, 0]


def test_fig9_verdict_without_d0_is_not_measured() -> None:
    diff = diff_frame(False, False, True)
    partial = diff[diff["config"] != "EasyScale D0"]
    assert fig9.verdict(partial, "smoke", "t").status is Status.NOT_MEASURED


def test_fig12_verdict_and_figure() -> None:
    table = pd.DataFrame(
        {
            "device_type": ["fast"] * 3 + ["slow"] * 3,
            "level": ["D0", "D1", "D1+D2"] * 2,
            "step_seconds": [1.0, 1.05, 1.8, 2.0, 2.1, 2.4],
        }
    )
    first = table.groupby("device_type")["step_seconds"].transform("first")
    table["relative_time"] = table["step_seconds"] / first
    got = overhead.levels_verdict(table, "smoke", "t", runs=["r"])
    assert got.status is Status.REPRODUCED and got.runs == ("r",)
    flipped = table.assign(level=table["level"].replace({"D1": "D1+D2", "D1+D2": "D1"}))
    assert overhead.levels_verdict(flipped, "smoke", "t").status is Status.NOT_REPRODUCED
    close = table.assign(relative_time=[1.0, 1.0, 1.05, 1.0, 1.0, 0.98])  # within the margin
    assert overhead.levels_verdict(close, "smoke", "t").status is Status.NOT_RESOLVED
    assert isinstance(overhead.levels_figure(table), go.Figure)


def test_fig12_repeats_that_disagree_leave_it_not_resolved(monkeypatch) -> None:
    """A device type counts only where the interval of D1+D2 / D1 over the repeats is
    wholly beyond the margin; the pooled table alone, and then "every repeat on the same
    side", each flipped between two smoke runs."""
    seconds = {  # (repeat, device type, level) -> step time; repeat 1 shows no D2 cost
        (0, "fast", "D0"): 1.0, (0, "fast", "D1"): 1.0, (0, "fast", "D1+D2"): 1.5,
        (0, "slow", "D0"): 2.0, (0, "slow", "D1"): 2.0, (0, "slow", "D1+D2"): 3.0,
        (1, "fast", "D0"): 1.0, (1, "fast", "D1"): 1.2, (1, "fast", "D1+D2"): 1.2,
        (1, "slow", "D0"): 2.0, (1, "slow", "D1"): 2.0, (1, "slow", "D1+D2"): 3.0,
    }  # fmt: skip
    runs = pd.DataFrame(
        [{"repeat": r, "device_type": d, "level": lv, "run": (r, d, lv)} for r, d, lv in seconds]
    )
    monkeypatch.setattr(
        overhead_tables,
        "_records",
        lambda run: pd.DataFrame(
            {"kind": "step", "step": [0, 1, 2], "seconds": [9.0, seconds[run], seconds[run]]}
        ),
    )  # the first step is warm-up and dropped
    ratios = overhead.repeat_ratios(runs)
    assert ratios.set_index(["repeat", "device_type"])["d2_over_d1"].to_dict() == {
        (0, "fast"): 1.5, (0, "slow"): 1.5, (1, "fast"): 1.0, (1, "slow"): 1.5,
    }  # fmt: skip
    # the launches' spread, pooled over the six cells: fast D1 (1.0, 1.2), fast D1+D2
    # (1.5, 1.2); every other cell's two launches agree
    logs = [math.log(x) for x in (1.0, 1.2, 1.5, 1.2)]
    squares = sum((x - (logs[0] + logs[1]) / 2) ** 2 for x in logs[:2])
    squares += sum((x - (logs[2] + logs[3]) / 2) ** 2 for x in logs[2:])
    assert set(ratios["launch_df"]) == {6}
    assert ratios["launch_log_sd"].iloc[0] == pytest.approx(math.sqrt(squares / 6))
    table = overhead.levels_table(runs)
    pooled = overhead.levels_verdict(table, "smoke", "t", runs=["r"])
    assert "no spread" in pooled.precision
    got = overhead.levels_verdict(table, "smoke", "t", runs=["r"], per_repeat=ratios)
    assert got.status is Status.NOT_RESOLVED and "wholly beyond the margin" in got.why
    assert got.precision == (
        "2 interleaved repeats; D1+D2 / D1 over them at 95%: fast 1.22 (1.00–1.50), slow 1.50 "
        "(1.22–1.84) (repeats fast 1.00–1.50, slow 1.50–1.50); the interval from the "
        "launches' spread, pooled over every device type and level: ± 8% a launch (6 df)"
    )
    # two launches that agree by chance (make run #25: 0.68 and 0.70 on the slow type,
    # where that run's launches spread ±16%) do not decide: with the pooled spread the
    # interval reaches past 0.9; with a spread of 2% it would not
    chance = ratios.assign(d2_over_d1=[1.0, 0.68, 1.66, 0.70], launch_log_sd=0.16)
    v = overhead.levels_verdict(table, "smoke", "t", per_repeat=chance)
    assert v.status is Status.NOT_RESOLVED and "slow 0.69 (0.47–1.02)" in v.precision
    tight = chance.assign(launch_log_sd=0.02)
    assert overhead.levels_verdict(table, "smoke", "t", per_repeat=tight).status is (
        Status.NOT_REPRODUCED
    )
    # without a pooled spread, the t interval over the repeats alone
    ratios = ratios.drop(columns=["launch_log_sd", "launch_df"])
    alone = overhead.levels_verdict(table, "smoke", "t", per_repeat=ratios)
    assert "fast 1.25 (-1.93–4.43), slow 1.50 (1.50–1.50)" in alone.precision
    agree = ratios[ratios["repeat"] == 0]
    both = pd.concat([agree, agree.assign(repeat=1)])
    assert overhead.levels_verdict(table, "smoke", "t", per_repeat=both).status is pooled.status
    # below the margin in both repeats, but two repeats 0.1 apart (make run #12's 0.66 and
    # 0.76): the interval reaches past 1, not resolved; three close ones below: not reproduced
    below = ratios.assign(d2_over_d1=[0.66, 1.5, 0.76, 1.5])
    assert overhead.levels_verdict(table, "smoke", "t", per_repeat=below).status is (
        Status.NOT_RESOLVED
    )
    three = pd.concat([below, below[below["repeat"] == 0].assign(repeat=2, d2_over_d1=0.7)])
    assert overhead.levels_verdict(table, "smoke", "t", per_repeat=three).status is (
        Status.NOT_REPRODUCED
    )


def test_fig11_verdict_and_figure() -> None:
    numbers = {
        "switch_share": 0.004,
        "switch_overhead": -0.01,
        "switch_us": 120.0,
        "est_step_s": 0.1,
        "saving_other_ests": 0.2,
        "saving_last_est": 0.05,
        "ddp_step_s": 0.01,
    }
    cases = [overhead.step_case("paper step", numbers)]
    got = overhead.switching_verdict(cases, "paper", "t", runs=["r1"])
    assert got.status is Status.REPRODUCED and got.runs == ("r1",)
    numbers["switch_share"] = 0.08
    cases = [overhead.step_case("paper step", numbers)]
    assert overhead.switching_verdict(cases, "paper", "t").status is Status.NOT_REPRODUCED
    assert isinstance(overhead.switching_figure(numbers, caption="c"), go.Figure)
    assert isinstance(overhead.switching_figure(numbers, caption="c", cases=cases), go.Figure)


@pytest.mark.parametrize(
    ("other", "last", "status"),
    [
        (0.2, 0.05, Status.REPRODUCED),  # ESTs cheaper than a DDP step, the syncing one less so
        (0.2, 0.3, Status.NOT_REPRODUCED),  # the syncing EST cheaper than the others
        (-0.1, -0.2, Status.NOT_REPRODUCED),  # ESTs dearer than a DDP step
    ],
)
def test_fig13_is_a_claim_of_fig11_computed_from_the_savings(
    other: float, last: float, status: Status
) -> None:
    numbers = {"saving_other_ests": other, "saving_last_est": last, "ddp_step_s": 0.02}
    got = overhead.est_time_verdict(numbers, "smoke", "t", runs=["r1", "r2"])
    assert got.status is status and got.figure == "Fig 11" and "Fig 13" in got.claim
    assert got.lab_value == other and got.runs == ("r1", "r2")
    assert got.published_value == published.value("Fig 13", setting="ESTs 0-6").value
    missing = overhead.est_time_verdict({}, "smoke", "t")
    with pytest.raises(NothingMeasured):
        runs.measured([got, missing])
    assert runs.measured(got) is got


def test_fig13_over_repeats_is_judged_by_intervals_over_the_repeats() -> None:
    numbers = {"saving_other_ests": 0.1, "saving_last_est": 0.05, "ddp_step_s": 0.02}

    def judged(others: list[float], lasts: list[float]) -> Status:
        reps = pd.DataFrame({"repeat": range(len(others)), "saving_other_ests": others,
                             "saving_last_est": lasts})  # fmt: skip
        return overhead.est_time_verdict(numbers, "smoke", "t", repeats=reps).status

    assert judged([0.11, 0.12, 0.13], [0.01, 0.03, 0.02]) is Status.REPRODUCED
    # every repeat shows it, but two that far apart leave the saving's interval across 0
    assert judged([0.11, 0.31], [0.01, 0.10]) is Status.NOT_RESOLVED
    assert judged([0.11, -0.37], [0.01, -0.48]) is Status.NOT_RESOLVED
    assert judged([-0.10, -0.12, -0.11], [-0.2, -0.15, -0.2]) is Status.NOT_REPRODUCED
    assert judged([0.10, 0.12, 0.11], [0.20, 0.21, 0.22]) is Status.NOT_REPRODUCED  # last less
    reps = pd.DataFrame({"repeat": [0, 1, 2], "saving_other_ests": [0.11, 0.12, 0.13],
                         "saving_last_est": [0.01, 0.03, 0.02]})  # fmt: skip
    v = overhead.est_time_verdict(numbers, "smoke", "t", repeats=reps)
    assert "3 interleaved repeats" in v.precision_sentence() and "12.0% ± 2.5%" in v.precision
    assert v.lab_value == pytest.approx(0.12) and v.lab_ci == pytest.approx(0.0248, abs=1e-3)


def test_every_room_verdict_names_a_catalog_figure_of_the_room() -> None:
    catalog = {f.figure for f in FIGURES if f.room == "easyscale"}
    made = {
        fig9.verdict(diff_frame(False, False, True), "smoke", "t").figure,
        sharing.verdict(pd.DataFrame(columns=["system", "workers"]), "smoke", "t").figure,
        overhead.est_time_verdict({}, "smoke", "t").figure,
        overhead.levels_verdict(
            pd.DataFrame(columns=["device_type", "level", "relative_time"]), "smoke", "t"
        ).figure,
        overhead.switching_verdict([], "smoke", "t").figure,
    }
    assert made <= catalog and {"Fig 9", "Fig 10", "Fig 11", "Fig 12"} <= catalog


@pytest.mark.parametrize(
    "defaults",
    [fig9.DEFAULTS, sharing.DEFAULTS, overhead.SWITCHING_DEFAULTS, overhead.LEVELS_DEFAULTS],
)
def test_scale_defaults_fill_only_what_the_notebook_left_none(defaults: dict) -> None:
    assert set(defaults["smoke"]) == set(defaults["paper"])
    unset = dict.fromkeys(defaults["smoke"])
    assert scale_parameters("smoke", defaults, **unset) == defaults["smoke"]
    chosen = scale_parameters("paper", defaults, **{**unset, "steps": 7})
    assert chosen["steps"] == 7 and chosen["base"] == defaults["paper"]["base"]
    with pytest.raises(ParameterError):
        scale_parameters("huge", defaults)


def test_smoke_defaults_keep_what_the_claims_need() -> None:
    # Fig 9's claim is about D0, D1 and D1+D2 over all three stages
    assert {"D0", "D1", "D1+D2"} <= set(fig9.DEFAULTS["smoke"]["levels"])
    assert fig9.DEFAULTS["smoke"]["steps"] >= 2
    assert len(sharing.DEFAULTS["smoke"]["workers"]) >= 3  # a slope per system
    for d in (overhead.SWITCHING_DEFAULTS, overhead.LEVELS_DEFAULTS):
        assert d["smoke"]["steps"] >= 3  # timed steps after the first


def test_fig10_slopes_and_verdict() -> None:
    table = pd.DataFrame(
        {
            "system": [sharing.PACKED] * 3 + [EST_LABEL] * 3,
            "workers": [1, 2, 4] * 2,
            "memory_gib": [0.3, 0.6, 1.2, 0.3, 0.31, 0.33],
            "memory_measure": ["PSS"] * 6,
            "rss_peak_gib": [0.3] * 6,
            "samples_per_s": [100.0] * 6,
        }
    )
    s = sharing.slopes(table)
    assert s[sharing.PACKED] == pytest.approx(0.3) and s[EST_LABEL] == pytest.approx(0.01)
    got = sharing.verdict(table, "smoke", "t", runs=[Path("a"), "b"])
    assert got.status is Status.REPRODUCED and got.runs == ("a", "b")
    same = table.assign(memory_gib=[0.3, 0.6, 1.2] * 2)
    assert sharing.verdict(same, "smoke", "t").status is Status.NOT_REPRODUCED
    assert isinstance(sharing.figure(table), go.Figure)


def test_fig10_a_worker_count_that_ran_out_of_gpu_memory_is_kept_and_not_fitted() -> None:
    from lab.errors import RankFailure, RanksFailed

    oom = RankFailure(0, "h", 1, 1, tail=("torch.OutOfMemoryError: CUDA out of memory.",))
    assert sharing.out_of_memory(RanksFailed([oom]))
    assert not sharing.out_of_memory(RanksFailed([RankFailure(0, "h", 1, 1, tail=("boom",))]))
    runs = pd.DataFrame([{"system": sharing.PACKED, "workers": 8, "run": None, "fits": False}])
    with pytest.raises(NothingMeasured):  # nothing that fitted: nothing measured
        sharing.sharing_table(runs)
    table = pd.DataFrame(
        {
            "system": [sharing.PACKED] * 3,
            "workers": [1, 2, 8],
            "memory_gib": [4.7, 9.4, float("nan")],
            "memory_measure": ["CUDA max allocated"] * 2 + [None],
            "fits": [True, True, False],
        }
    )
    assert sharing.slopes(table)[sharing.PACKED] == pytest.approx(4.7)
