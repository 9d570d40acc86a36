"""KungFu's workloads and the cross-check arithmetic, without KungFu: flags are checked
before anything is imported, and the comparisons are plain functions of records."""

from __future__ import annotations

import math

import kungfu_crosscheck as crosscheck
import pytest

from lab.bench import kungfu_elastic, kungfu_regression
from lab.errors import ParameterError


def test_schedule_parses_and_refuses_nonsense():
    assert kungfu_elastic.parse_schedule("5:2, 10:1") == {5: 2, 10: 1}
    assert kungfu_elastic.parse_schedule("") == {}
    for bad in ("5", "5:0", "a:2", "5:-1"):
        with pytest.raises(ParameterError):
            kungfu_elastic.parse_schedule(bad)


@pytest.mark.parametrize(
    "module, argv",
    [
        (kungfu_elastic, ["--schedule", "3"]),
        (kungfu_elastic, ["--model", "nonsense"]),
        (kungfu_regression, ["--lr", "0"]),
        (kungfu_regression, ["--mode", "ring"]),
        (kungfu_regression, ["--steps", "0"]),
    ],
)
def test_bad_flags_exit_2(module, argv, capsys):
    with pytest.raises(SystemExit) as info:
        module.parse_args(argv)
    assert info.value.code == 2
    assert "error" in capsys.readouterr().err


def test_elastic_config_carries_the_schedule():
    cfg, schedule, timed = kungfu_elastic.parse_args(["--schedule", "3:2,6:1", "--steps", "8"])
    assert schedule == {3: 2, 6: 1} and cfg.steps == 8 and cfg.backend == "kungfu-elastic"
    assert timed == []


def test_timed_schedule_parses_and_refuses_nonsense():
    assert kungfu_elastic.parse_timed_schedule("0:1, 2.5:2,9:stop") == [
        (0.0, 1),
        (2.5, 2),
        (9.0, kungfu_elastic.STOP),
    ]
    for bad in ("5", "5:0", "a:2", "-1:2", "5:2,3:1", "5:2,5:1"):
        with pytest.raises(ParameterError, match="timed_schedule"):
            kungfu_elastic.parse_timed_schedule(bad)
    with pytest.raises(SystemExit):  # not both schedules
        kungfu_elastic.parse_args(["--schedule", "3:2", "--timed-schedule", "0:1"])


def step(rank: int, s: int, loss: float) -> dict:
    return {"kind": "step", "rank": rank, "step": s, "eval_loss": loss}


def test_mean_curve_and_late_half_comparison():
    recs = [step(0, 0, 4.0), step(1, 0, 2.0), step(0, 1, 1.0), step(1, 1, 1.0), step(0, 2, 0.5)]
    curve = crosscheck.mean_eval_curve(recs)
    assert curve == {0: 3.0, 1: 1.0, 2: 0.5}
    other = {0: 3.0, 1: 1.2, 2: 0.75, 3: 0.1}
    cmp = crosscheck.compare_curves(curve, other, tail=0.5)
    assert cmp["steps"] == 3  # the last half of 3 shared steps: step 2
    assert cmp["lab_final"] == pytest.approx(0.5) and cmp["kungfu_final"] == pytest.approx(0.75)
    assert cmp["ratio"] == pytest.approx(1.5)
    with pytest.raises(ValueError):
        crosscheck.compare_curves({0: 1.0}, {0: 1.0})


def metric(rank: int, s: int, name: str, value: float) -> dict:
    return {"kind": "metric", "rank": rank, "step": s, "name": name, "value": value}


def test_noise_scale_pairs_join_by_rank_and_step():
    recs = [
        metric(0, 0, "noise_scale", 10.0),
        metric(0, 0, "kungfu_noise_scale", 10.001),
        metric(1, 0, "kungfu_noise_scale", 3.0),  # the lab's value is missing: not a pair
        metric(0, 1, "variance", 1.0),
    ]
    pairs = crosscheck.noise_scale_pairs(recs)
    assert pairs == [(10.0, 10.001)]
    assert crosscheck.max_relative_difference(pairs) == pytest.approx(1e-4, rel=1e-3)
    assert crosscheck.max_relative_difference([(0.0, 0.0)]) == 0.0
    assert math.isinf(crosscheck.max_relative_difference([(float("nan"), 1.0)]))
