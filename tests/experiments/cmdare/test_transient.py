"""The transient-server Monte Carlo against closed-form expectations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lab.errors import ParameterError
from lab.experiments.cmdare.transient import (
    HourlyLifetimes,
    Job,
    exponential_lifetimes,
    fixed_seconds,
    simulate,
    summarize,
    what_if,
)


def test_without_revocations_the_job_takes_its_undisturbed_time() -> None:
    job = Job(steps=10_000, speed=10.0, servers=3, checkpoint_every=1000, checkpoint_seconds=5.0)
    assert job.undisturbed_seconds() == pytest.approx(1000.0 + 9 * 5.0)
    never = fixed_seconds(1e9)
    seconds, revocations = simulate(job, never, fixed_seconds(60.0), np.random.default_rng(0))
    assert (seconds, revocations) == (pytest.approx(1045.0), 0)


def test_memoryless_revocations_match_the_closed_form_mean() -> None:
    """One server, exponential lifetimes (mean m), checkpoints every step at no cost, a fixed
    restart R: revocations arrive as a Poisson process while training runs, so
    E[time] = W + (W / m) R, with at most one step lost per revocation."""
    work, mean_life, restart = 1000.0, 500.0, 100.0
    job = Job(steps=10_000, speed=10.0, checkpoint_every=1)
    runs = what_if(
        job,
        exponential_lifetimes(mean_life / 3600.0),
        fixed_seconds(restart),
        transient_price=1.0,
        on_demand_price=3.0,
        trials=2000,
        seed=7,
    )
    tr = runs[runs["option"] == "transient"]
    expected_revocations = work / mean_life
    assert tr["revocations"].mean() == pytest.approx(expected_revocations, abs=0.15)
    expected = work + expected_revocations * restart
    sem = tr["hours"].std() * 3600 / math.sqrt(len(tr))
    lost = expected_revocations * (1 / job.speed)
    assert abs(tr["hours"].mean() * 3600 - expected) < 4 * sem + lost
    assert runs[runs["option"] == "on-demand"]["cost"].iloc[0] == pytest.approx(3 * work / 3600)


def test_what_if_is_seeded() -> None:
    job = Job(steps=5000, speed=5.0, servers=2, checkpoint_every=500, checkpoint_seconds=2.0)
    args = (job, exponential_lifetimes(0.2), fixed_seconds(30.0), 1.0, 3.0)
    a, b = what_if(*args, trials=50, seed=3), what_if(*args, trials=50, seed=3)
    assert a.equals(b)
    s = summarize(a).set_index("option")
    assert s.loc["transient", "hours_p5"] <= s.loc["transient", "hours"]


def test_lost_work_is_done_again() -> None:
    """Revoked once, 0.6 interval after the last checkpoint: that work is redone."""
    job = Job(steps=100, speed=1.0, checkpoint_every=10)
    lives = iter([[35.0], [1e9]])
    seconds, revocations = simulate(
        job, lambda rng, n: np.asarray(next(lives)), fixed_seconds(20.0), None
    )
    # 30 steps saved at t=35, restart until 55, then 70 steps: 125 s.
    assert (seconds, revocations) == (pytest.approx(125.0), 1)


def test_hourly_lifetimes_sample_their_own_mean() -> None:
    life = HourlyLifetimes(hours=(1, 2, 3), cdf=(0.25, 0.25, 0.5), max_hours=24)
    assert life.mean_hours() == pytest.approx(0.25 * 0.5 + 0.25 * 2.5 + 0.5 * 24)
    draws = life.sample(np.random.default_rng(1), 200_000) / 3600
    assert draws.mean() == pytest.approx(life.mean_hours(), rel=0.01)
    assert ((draws > 1) & (draws < 2)).sum() == 0  # the empty bin stays empty
    assert ((draws > 2) & (draws < 3)).mean() == pytest.approx(0.25, abs=0.01)
    assert (draws == 24).mean() == pytest.approx(0.5, abs=0.01)


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ParameterError, match="cdf"):
        HourlyLifetimes(hours=(1, 2), cdf=(0.5, 0.4))
    with pytest.raises(ParameterError, match="steps"):
        Job(steps=0, speed=1.0)
    with pytest.raises(ParameterError, match="speed"):
        Job(steps=10, speed=0.0)
    with pytest.raises(ParameterError, match="trials"):
        what_if(Job(10, 1.0), fixed_seconds(1), fixed_seconds(1), 1, 1, trials=0)
