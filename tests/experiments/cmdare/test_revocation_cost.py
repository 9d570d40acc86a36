"""What a revocation cost a run, on tables whose answers are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lab.errors import NothingMeasured
from lab.experiments.cmdare import revocation_cost


def _steps(rate_before: float, gap: float, rate_after: float, t0: float = 1000.0) -> pd.DataFrame:
    """Steps at ``rate_before`` for 10 s, none for ``gap`` s, then ``rate_after`` for 10 s."""
    before = t0 + np.arange(0, 10, 1 / rate_before)
    after = t0 + 10 + gap + np.arange(0, 10, 1 / rate_after)
    ends = np.concatenate([before, after])
    return pd.DataFrame({"ended_at": ends, "global_step": np.arange(1, len(ends) + 1)})


def test_effect_of_a_gap_is_a_full_dip_then_recovery() -> None:
    steps = _steps(10.0, 3.0, 10.0)
    e = revocation_cost.effect(steps, revoked_at=1010.0)
    assert e.rate_before == pytest.approx(10.0, rel=0.05)
    assert e.lowest == 0 and e.dip == pytest.approx(1.0)
    # back to 95% once the 2 s window is >= 95% full again: 3 s gap + 1.9 s
    assert e.recovery == pytest.approx(4.9, abs=0.3)
    assert e.steps_lost == pytest.approx(30, abs=4)  # the 3 s without steps, at 10/s


def test_a_slower_rate_after_never_recovers() -> None:
    e = revocation_cost.effect(_steps(10.0, 0.0, 5.0), revoked_at=1010.0)
    assert e.recovery is None and e.dip == pytest.approx(0.5, abs=0.06)


def test_restart_overhead_is_the_time_back_to_the_step_reached() -> None:
    t = 1000.0 + np.arange(0, 10, 0.1)  # steps 1..100 at 10/s, revoked at 1010
    redo = 1015.0 + np.arange(0, 8, 0.1)  # restored at 60: steps 61..140 from 1015
    steps = pd.DataFrame(
        {"ended_at": np.concatenate([t, redo]),
         "global_step": np.concatenate([np.arange(1, 101), np.arange(61, 141)])}
    )  # fmt: skip
    seconds, reached = revocation_cost.restart_overhead(steps, 1010.0)
    assert reached == 100 and seconds == pytest.approx(5.0 + 3.9, abs=0.01)


def test_restart_parts_split_the_overhead_at_the_first_redone_step() -> None:
    t = 1000.0 + np.arange(0, 10, 0.1)  # steps 1..100 at 10/s, revoked at 1010
    redo = 1015.0 + np.arange(0, 8, 0.1)  # restored at 60: steps 61..140 from 1015
    steps = pd.DataFrame(
        {"ended_at": np.concatenate([t, redo]),
         "global_step": np.concatenate([np.arange(1, 101), np.arange(61, 141)])}
    )  # fmt: skip
    restart, redone, reached = revocation_cost.restart_parts(steps, 1010.0)
    assert reached == 100
    assert restart == pytest.approx(5.0, abs=0.01) and redone == pytest.approx(3.9, abs=0.01)


def test_a_step_ending_just_after_the_revocation_counts_as_reached() -> None:
    """A step in flight at the revocation ends 3 ms after it: it is the step reached, not
    the job being back (the overhead read 0.0 s in a make run)."""
    t = 1000.0 + np.arange(0, 10, 0.1)  # steps 1..100 at 10/s, revoked at 1009.95
    redo = 1015.0 + np.arange(0, 8, 0.1)  # restored at 60: steps 61..140 from 1015
    steps = pd.DataFrame(
        {"ended_at": np.concatenate([t, [1009.953], redo]),
         "global_step": np.concatenate([np.arange(1, 101), [101], np.arange(61, 141)])}
    )  # fmt: skip
    restart, redone, reached = revocation_cost.restart_parts(steps, 1009.95)
    assert reached == 101
    assert restart == pytest.approx(5.05, abs=0.01) and redone == pytest.approx(4.0, abs=0.01)


def test_restart_that_never_gets_back_says_so() -> None:
    steps = pd.DataFrame({"ended_at": [1.0, 2.0, 5.0], "global_step": [1, 2, 1]})
    with pytest.raises(NothingMeasured, match="never got back to step 2"):
        revocation_cost.restart_overhead(steps, 3.0)


def test_linear_fit() -> None:
    a, b, r2 = revocation_cost.linear_fit([1, 2, 3], [3, 5, 7])
    assert (a, b, r2) == pytest.approx((1.0, 2.0, 1.0))
    with pytest.raises(NothingMeasured):
        revocation_cost.linear_fit([1, 1], [2, 3])


def _two_ranks(rate_before: float, rate_after: float, jitter: float, seed: int) -> pd.DataFrame:
    """Two ranks' steps, 10 s at ``rate_before`` (both ranks together), revoked at 1010,
    rank 1 back at 1011, then 8 s at ``rate_after``; rank 0 goes on 2 s longer alone.
    Step gaps vary by ``jitter`` (relative), as a real run's do."""
    rng = np.random.default_rng(seed)

    def ends(t0: float, t1: float, rate: float) -> np.ndarray:
        gaps = (1 / rate) * (1 + jitter * rng.uniform(-1, 1, int((t1 - t0) * rate * 1.5)))
        t = t0 + np.cumsum(gaps)
        return t[t < t1]

    rows = []
    for rank in (0, 1):
        t = [ends(1000.0, 1010.0, rate_before / 2)]
        t.append(ends(1010.0 if rank == 0 else 1011.0, 1019.0, rate_after / 2))
        if rank == 0:
            t.append(ends(1019.0, 1021.0, rate_after / 2))
        rows.append(pd.DataFrame({"ended_at": np.concatenate(t), "rank": rank}))
    return pd.concat(rows, ignore_index=True)


def test_recovered_fraction_is_the_rate_after_over_the_rate_before_with_an_interval() -> None:
    full = revocation_cost.recovered_fraction(_two_ranks(60, 60, 0.5, 1), 1010.0, 1011.0)
    assert full.mean == pytest.approx(1.0, abs=0.05) and 0 < full.ci < 0.1
    slow = revocation_cost.recovered_fraction(_two_ranks(60, 45, 0.5, 2), 1010.0, 1011.0)
    assert slow.mean == pytest.approx(0.75, abs=0.07) and slow.mean + slow.ci < 0.95
    # the 2 s rank 0 runs alone at the end (at half the rate) are not part of "after"
    with_tail = revocation_cost.recovered_fraction(_two_ranks(60, 60, 0.0, 3), 1010.0, 1011.0)
    assert with_tail.mean == pytest.approx(1.0, abs=0.03)


def test_recovered_fraction_leaves_the_ramp_out_of_the_rate_before() -> None:
    """By default "before" is every steady bin before the revocation: the slow first
    seconds of a run (TF's first steps) are cut by MSER, a fixed window keeps them."""
    steps = _two_ranks(60, 60, 0.2, 5)
    ramp = steps["ended_at"] < 1002.0
    slow = steps[ramp].assign(ended_at=1000.0 + (steps[ramp]["ended_at"] - 1000.0) * 3)
    ramped = pd.concat([slow[slow["ended_at"] < 1002.0], steps[~ramp]], ignore_index=True)
    steady = revocation_cost.recovered_fraction(ramped, 1010.0, 1011.0)
    assert steady.mean == pytest.approx(1.0, abs=0.05)
    whole = revocation_cost.recovered_fraction(ramped, 1010.0, 1011.0, before=10.0)
    assert whole.mean > steady.mean + 0.05


def test_recovered_fraction_needs_time_on_both_sides() -> None:
    steps = _two_ranks(60, 60, 0.2, 4)
    with pytest.raises(NothingMeasured, match=r"two 0\.5-s bins"):
        revocation_cost.recovered_fraction(steps, 1010.0, 1017.0)  # settled at 1019: none left


def test_recovered_share_reads_the_rates_at_the_survivors_pace() -> None:
    """A machine 25% slower after the revocation slows both workers alike: the rates
    read 75%, the replacement's share is back where the revoked worker's was. A
    replacement at half its peer's pace is short of it whatever the machine did."""
    slower_machine = _two_ranks(60, 45, 0.3, 6)
    rates = revocation_cost.recovered_fraction(slower_machine, 1010.0, 1011.0)
    assert rates.mean == pytest.approx(0.75, abs=0.07)
    share = revocation_cost.recovered_share(slower_machine, 1010.0, 1011.0, [1])
    assert share.mean == pytest.approx(1.0, abs=0.03) and 0 < share.ci < 0.05
    steps = _two_ranks(60, 60, 0.3, 7)
    back = (steps["rank"] == 1) & (steps["ended_at"] > 1011.0)
    halved = pd.concat([steps[~back], steps[back].iloc[::2]], ignore_index=True)
    lagging = revocation_cost.recovered_share(halved, 1010.0, 1011.0, [1])
    # survivor 30 + replacement 15 steps/s against 30 + 30: 75% at the survivor's pace
    assert lagging.mean == pytest.approx(0.75, abs=0.05) and lagging.mean + lagging.ci < 0.95
    with pytest.raises(NothingMeasured, match="a survivor"):
        revocation_cost.recovered_share(steps[steps["rank"] == 1], 1010.0, 1011.0, [1])


def test_share_timeline_dips_while_the_replaced_rank_is_gone() -> None:
    """Rank 1 is gone from 1010 to 1011 and rank 0 ends alone after 1019: each 2-s window
    holding that second has it at a third of the steps, at none once rank 0 is alone."""
    steps = _two_ranks(60, 60, 0.0, 8)
    share = revocation_cost.share_timeline(steps, 1010.0, [1]).set_index("t")["share"]
    assert share.loc[-5.0:-0.5].between(0.45, 0.55).all()  # two equal ranks before
    assert share.loc[1.0:2.0].between(0.3, 0.36).all()
    assert share.loc[3.5:8.5].between(0.45, 0.55).all()
    assert share.loc[11.0:].max() == 0


def test_rate_before_needs_no_fixed_window_and_leaves_the_ramp_out() -> None:
    """Make run #30: a chief revoked 4.9 s after its first step had "fewer than 5 s of
    steps before the revocation". The steady bins before it are enough."""
    steps = _steps(10.0, 3.0, 10.0)
    early = revocation_cost.effect(steps, revoked_at=1003.0)  # 3 s of steps before it
    assert early.rate_before == pytest.approx(10.0, rel=0.05)
    ramp = np.arange(1000.0, 1002.0, 1 / 3.0)  # 3 steps/s for 2 s, then 10/s
    ramped = pd.DataFrame({"ended_at": np.concatenate([ramp, 1002.0 + np.arange(0, 8, 0.1)])})
    assert revocation_cost.rate_before(ramped, 1010.0) == pytest.approx(10.0, rel=0.05)
    with pytest.raises(NothingMeasured, match=r"two 0\.5-s bins"):
        revocation_cost.rate_before(steps, 1000.6)
