"""The adaptive-batch policy (pure) and the workload's flag checks; real horovodrun runs of
the workload are the Fig 4 notebook's, checked by its notebook test (notebook_checks.py)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from lab.bench.adaptive import (
    AdaptiveBatchPolicy,
    FixedBatchPolicy,
    arm_order,
    parse_args,
    parse_arms,
)
from lab.errors import ParameterError

REPO = Path(__file__).resolve().parents[2]
HOROVODRUN = Path(sys.executable).parent / "horovodrun"


def _feed(policy: AdaptiveBatchPolicy, ratio_per_step: list[float]) -> list[int]:
    """Feed noise scales whose ratio to the current batch is as given; the batches used."""
    used = []
    for ratio in ratio_per_step:
        used.append(policy.batch)
        policy.observe(ratio * policy.batch)
    return used


def test_grows_when_the_smoothed_ratio_rises_and_only_at_decisions() -> None:
    p = AdaptiveBatchPolicy(8, interval=5)
    used = _feed(p, [1.0] * 5 + [1.5] * 5)
    assert used == [8] * 10  # the first decision only records the EMA
    assert p.batch == 16  # the second sees a rise: ×2
    assert p.last_decision is not None and p.last_decision > 1.0


def test_no_growth_when_the_ratio_falls_or_stays() -> None:
    p = AdaptiveBatchPolicy(8, interval=3)
    _feed(p, [4.0, 3.5, 3.0, 2.5, 2.0, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5])
    assert p.batch == 8


def test_a_rise_is_judged_on_the_ratio_to_the_new_batch() -> None:
    """After growing, the same |noise scale| is a smaller ratio: no second growth."""
    p = AdaptiveBatchPolicy(8, interval=2, decay=0.0)
    for gns in (8.0, 8.0, 16.0, 16.0):  # ratios 1, 1, 2, 2 -> rise -> 16
        p.observe(gns)
    assert p.batch == 16
    for _ in range(6):
        p.observe(16.0)  # ratio 1 now: lower than at the last decision
    assert p.batch == 16


def test_growth_is_capped_and_kept_a_multiple_of_the_workers() -> None:
    p = AdaptiveBatchPolicy(6, max_batch=40, growth=2.0, interval=1, multiple_of=3, decay=0.0)
    sizes = [p.observe(g) for g in (6.0, 24.0, 96.0, 400.0, 1600.0, 6400.0)]
    assert sizes == [6, 12, 24, 39, 39, 39]
    assert all(s % 3 == 0 for s in sizes)


def test_clamp_bounds_one_outlier() -> None:
    p = AdaptiveBatchPolicy(10, interval=100, decay=0.5, clamp=2.0)
    p.observe(10.0)  # ratio 1
    p.observe(1e9)  # clamped to 2
    assert p.ema == pytest.approx(1.5)


def test_non_finite_values_are_skipped_but_count_as_steps() -> None:
    p = AdaptiveBatchPolicy(8, interval=2)
    p.observe(float("nan"))
    p.observe(float("inf"))
    assert p.ema is None and p.steps == 2 and p.batch == 8
    p.observe(-16.0)  # the sign of a noisy estimate is dropped, as KungFu does
    assert p.ema == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"batch": 0}, "batch"),
        ({"batch": 64, "max_batch": 32}, "max-batch"),
        ({"batch": 8, "growth": 1.0}, "growth"),
        ({"batch": 8, "decay": 1.0}, "decay"),
        ({"batch": 8, "interval": 0}, "interval"),
        ({"batch": 8, "multiple_of": 3}, "multiple-of"),
    ],
)
def test_bad_parameters_name_themselves(kwargs: dict, name: str) -> None:
    with pytest.raises(ParameterError) as err:
        AdaptiveBatchPolicy(**kwargs)
    assert err.value.name == name


def test_fixed_policy_never_changes() -> None:
    p = FixedBatchPolicy(32)
    assert {p.observe(g) for g in (1.0, 1e6, math.nan)} == {32}


def test_arms_parse_and_alternate_their_order_seed_by_seed() -> None:
    arms = parse_arms("adaptive:32, fixed:32,fixed:1024")
    assert arms == [("adaptive", 32), ("fixed", 32), ("fixed", 1024)]
    assert [arm_order(arms, i)[0] for i in range(4)] == [arms[0], arms[2], arms[0], arms[2]]
    assert arm_order(arms, 1) == arms[::-1]
    for bad in ("adaptive", "sgd:32", "fixed:0", "fixed:x", "fixed:8,fixed:8"):
        with pytest.raises(ParameterError) as err:
            parse_arms(bad)
        assert err.value.name == "arms"


def test_the_flags_give_one_arm_or_the_listed_ones(capsys) -> None:
    assert parse_args(["--policy", "fixed", "--batch-size", "64"]).arm_list == [("fixed", 64)]
    assert parse_args(["--arms", "fixed:8,adaptive:8"]).arm_list == [
        ("fixed", 8),
        ("adaptive", 8),
    ]
    with pytest.raises(SystemExit):  # an adaptive arm above the cap: refused before any rank
        parse_args(["--arms", "adaptive:2048", "--max-batch-size", "1024"])
    assert "max-batch" in capsys.readouterr().err


def test_workload_rejects_bad_flags_before_importing_horovod() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lab.bench.adaptive", "--growth", "0.5"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert out.returncode == 2 and "growth" in out.stderr
