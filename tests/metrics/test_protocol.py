"""The measurement protocol on series and samples whose answers are known."""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

import pytest

from lab.errors import ParameterError
from lab.metrics.protocol import (
    Compared,
    Interleaver,
    Target,
    judge,
    overhead,
    precise,
    speedup,
    steady_state_start,
    throughput,
)

DATA = Path(__file__).with_name("data")


def _noise(n: int, mean: float, sd: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [max(1e-4, rng.gauss(mean, sd)) for _ in range(n)]


def _fixture(name: str) -> list[float]:
    with (DATA / name).open() as fh:
        rows = sorted(csv.DictReader(fh), key=lambda r: (int(r["rank"]), int(r["step"])))
    return [float(r["seconds"]) for r in rows if r["rank"] == "0"]


@pytest.mark.parametrize("seed", range(5))
def test_slow_first_steps_are_cut(seed: int) -> None:
    """Graph building and first allocations: three slow steps, then steady with 10% noise."""
    times = [2.5, 0.6, 0.3, *_noise(40, 0.1, 0.01, seed)]
    d = steady_state_start(times)
    assert 3 <= d <= 6
    kept = times[d:]
    assert max(kept) < 0.2
    assert sum(kept) / len(kept) == pytest.approx(0.1, rel=0.06)


def test_gradual_warm_up_is_cut_until_it_fades() -> None:
    """A warm-up that decays (caches filling): what is kept has the steady mean."""
    noise = _noise(60, 0.0, 0.005, 7)
    times = [0.1 + 0.5 * math.exp(-i / 3) + e for i, e in enumerate(noise)]
    d = steady_state_start(times)
    assert d >= 8  # 0.5 * exp(-8/3) = 0.035, still well above the noise
    assert sum(times[d:]) / len(times[d:]) == pytest.approx(0.1, rel=0.05)


def test_steady_series_keeps_almost_everything() -> None:
    times = _noise(40, 0.1, 0.01, 3)
    assert steady_state_start(times) <= 4


def test_late_slow_spell_is_not_a_warm_up() -> None:
    """Other users' load half-way through must not make the rule throw away the run."""
    times = [1.0, *_noise(40, 0.1, 0.005, 4)]
    times[30:34] = [0.4, 0.4, 0.4, 0.4]
    d = steady_state_start(times)
    assert 1 <= d <= len(times) // 2


def test_batched_mser_cuts_whole_batches() -> None:
    times = [3.0, 2.0, 1.0, 0.5, 0.3, 0.2, 0.15, *_noise(63, 0.1, 0.01, 5)]
    d = steady_state_start(times, batch=5)
    assert d % 5 == 0 and d >= 5


def test_too_short_series_and_bad_parameters() -> None:
    assert steady_state_start([5.0, 0.1, 0.1]) == 0
    assert steady_state_start([]) == 0
    with pytest.raises(ParameterError):
        steady_state_start([0.1] * 10, batch=0)
    with pytest.raises(ParameterError):
        steady_state_start([0.1] * 10, max_fraction=1.0)


def test_recorded_small_cnn_run() -> None:
    """A real run (lab.bench.synthetic, single backend, small_cnn, batch 32, 40 + 5 steps on
    this 2-core machine, shared): graph tracing makes step 0 take 2.5 s, then ~0.06-0.2 s."""
    times = _fixture("steps_small_cnn_single.csv")
    d = steady_state_start(times)
    assert 1 <= d <= len(times) // 2
    assert max(times[d:]) < 0.5 < times[0]


# --- the stopping rule and the scheduler ---------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _drive(sched: Interleaver, clock: FakeClock, measure, seconds: float = 1.0) -> list:
    order = []
    for point in sched:
        order.append(point)
        clock.now += seconds
        sched.record(point, measure(point, len(sched.samples[point])), seconds)
    return order


def test_stops_as_soon_as_the_interval_is_reached() -> None:
    rng = random.Random(1)
    clock = FakeClock()
    sched = Interleaver([throughput("a")], Target(rel_ci=0.02, budget_s=1e6), clock)
    _drive(sched, clock, lambda p, i: rng.gauss(100.0, 5.0))
    assert sched.reason == "precise"
    est = sched.compared[0].estimate(sched.samples)
    assert est.ci / est.mean <= 0.02
    assert est.n >= 3
    one_fewer = {"a": sched.samples["a"][:-1]}
    assert not precise(sched.compared[0], one_fewer, sched.target)


def test_respects_the_budget() -> None:
    rng = random.Random(2)
    clock = FakeClock()
    target = Target(rel_ci=0.001, budget_s=10.0)
    sched = Interleaver([speedup("a", "b")], target, clock)
    _drive(sched, clock, lambda p, i: rng.gauss(100.0, 50.0))
    assert sched.reason == "budget"
    assert clock.now <= target.budget_s
    assert sched.rounds == 5
    j = sched.judgements()[0]
    assert not j.precise and not j.resolved
    assert "not resolved at this scale within 10 s" in j.sentence()


def test_a_round_that_would_not_fit_does_not_start() -> None:
    clock = FakeClock()
    sched = Interleaver([speedup("a", "b")], Target(rel_ci=0.001, budget_s=10.0), clock)
    order = _drive(sched, clock, lambda p, i: 100.0 + i, seconds=3.0)
    assert order == ["a", "b"]  # a second round would take 6 s more: 12 > 10
    assert sched.reason == "budget"


def test_ratios_get_min_rounds_past_the_budget_and_context_points_do_not() -> None:
    """A ratio short of ``min_rounds`` when the budget is spent goes on alone: the
    throughput beside it (context for the figure, not the verdict) stops with the budget."""
    clock = FakeClock()
    quantities = [speedup("a", "b"), throughput("context")]
    target = Target(rel_ci=0.001, budget_s=10.0, min_rounds=5)
    sched = Interleaver(quantities, target, clock)
    order = _drive(sched, clock, lambda p, i: 100.0 + (-1) ** i * 10 * ("a" in p), seconds=2.0)
    assert sched.rounds == 5 and sched.reason == "budget"
    # a second full round would end at 12 s > 10 s: from then on a and b alone, rotated
    assert order == ["a", "b", "context"] + ["b", "a", "a", "b"] * 2
    assert [len(sched.samples[p]) for p in ("a", "b", "context")] == [5, 5, 5]
    assert sum(v is not None for v in sched.samples["a"]) == 5
    assert sum(v is not None for v in sched.samples["context"]) == 1
    j = sched.judgements()[0]
    assert j.repeats == 5 and j.reason == "budget"


def test_a_round_overrunning_the_budget_is_finished_by_the_ratios_alone() -> None:
    clock = FakeClock()
    target = Target(rel_ci=0.001, budget_s=12.5, min_rounds=5)
    sched = Interleaver([speedup("a", "b"), throughput("context")], target, clock)
    seconds = iter([1.0] * 9 + [4.0] + [1.0] * 10)  # round 3's first run overruns
    order = []
    for point in sched:
        order.append(point)
        took = next(seconds)
        clock.now += took
        sched.record(point, 100.0 + len(order) % 3, took)
    assert order[9:] == ["a", "b", "a", "b"]  # round 3 without context, then round 4
    assert sched.rounds == 5 and sched.samples["context"][3:] == [None, None]


def test_a_context_ratio_stops_with_the_budget_like_a_throughput() -> None:
    """An efficiency over a one-worker run is context beside the systems' ratio: past the
    budget only the decisive ratio's points run, and the context ratio's base sits out."""
    clock = FakeClock()
    quantities = [speedup("a", "b"), speedup("a", "single", context=True)]
    assert [q.decisive for q in quantities] == [True, False]
    target = Target(rel_ci=0.001, budget_s=10.0, min_rounds=5)
    sched = Interleaver(quantities, target, clock)
    order = _drive(sched, clock, lambda p, i: 100.0 + (-1) ** i * 10 * (p == "a"), seconds=2.0)
    assert order[:3] == ["a", "b", "single"] and "single" not in order[3:]
    assert sched.rounds == 5
    assert sum(v is not None for v in sched.samples["single"]) == 1


def test_min_rounds_stops_once_the_ratio_is_precise() -> None:
    clock = FakeClock()
    target = Target(rel_ci=0.05, budget_s=5.0, min_rounds=6)
    sched = Interleaver([speedup("a", "b")], target, clock)
    _drive(sched, clock, lambda p, i: {"a": 120.0, "b": 100.0}[p], seconds=2.0)
    assert sched.reason == "precise" and sched.rounds == 3  # min_repeats, not min_rounds


def test_interleaves_in_rotated_order() -> None:
    clock = FakeClock()
    quantities = [speedup("a", "c"), speedup("b", "c")]
    sched = Interleaver(quantities, Target(budget_s=1e6, max_repeats=3), clock)
    order = _drive(sched, clock, lambda p, i: random.Random(hash((p, i))).uniform(1, 2))
    assert order == ["a", "c", "b", "c", "b", "a", "b", "a", "c"]
    assert sched.reason == "repeats"


def test_precise_points_drop_out_of_later_rounds() -> None:
    rng = random.Random(3)
    clock = FakeClock()
    noise = {"steady": 0.1, "noisy": 30.0}
    sched = Interleaver([throughput("steady"), throughput("noisy")], Target(budget_s=20.0), clock)
    order = _drive(sched, clock, lambda p, i: rng.gauss(100.0, noise[p]))
    assert order[:6].count("steady") == 3
    assert "steady" not in order[6:] and order[6:]
    assert len(sched.samples["steady"]) == len(sched.samples["noisy"])  # gaps keep rounds


def test_paired_rounds_cancel_drift() -> None:
    """Both points slow down 5% per round (the machine gets busier): a 10% overhead is
    measured exactly, because each round's ratio shares the round's drift."""
    clock = FakeClock()
    sched = Interleaver([overhead("with", "without")], Target(budget_s=1e6), clock)
    base = {"with": 90.0, "without": 100.0}
    _drive(sched, clock, lambda p, i: base[p] * 0.95**i)
    j = sched.judgements()[0]
    assert j.estimate.mean == pytest.approx(0.10)
    assert j.resolved and j.direction == 1 and j.reason == "precise"
    assert "resolved, above 0%" in j.sentence()


def test_a_failed_run_is_a_gap_not_a_shift() -> None:
    samples = {"a": [110.0, None, 110.0], "b": [100.0, 100.0, 100.0]}
    est = speedup("a", "b").estimate(samples)
    assert est.n == 2 and est.mean == pytest.approx(1.1)


def test_judge_throughput_and_unresolved_difference() -> None:
    target = Target(rel_ci=0.05, budget_s=300.0)
    samples = {"x": [100.0, 101.0, 99.0, 100.0], "y": [100.0, 140.0, 70.0, 95.0]}
    assert judge(throughput("x"), samples, target).resolved
    j = judge(speedup("y", "x"), samples, target, seconds=301.0)
    assert not j.resolved and j.direction == 0 and j.null == 1.0
    assert j.sentence().endswith("not resolved at this scale within 5 minutes")


def test_bad_targets_and_quantities_fail_early() -> None:
    bad = ({"rel_ci": 0}, {"budget_s": -1}, {"min_repeats": 1}, {"max_repeats": 2},
           {"min_rounds": -1}, {"min_rounds": 5, "max_repeats": 4})  # fmt: skip
    for kwargs in bad:
        with pytest.raises(ParameterError):
            Target(**kwargs)
    with pytest.raises(ParameterError):
        Compared("latency", "a")
    with pytest.raises(ParameterError):
        Compared("speedup", "a")
    with pytest.raises(ParameterError):
        Interleaver([])


def test_recorded_horovod_mpi_run_on_emulated_hosts() -> None:
    """Four ranks of a real emulated-4 run: every rank's 17 s and 3 s start-up steps are
    cut, and the rule never cuts more than half (the series drifts with the machine's load)."""
    with (DATA / "steps_small_cnn_horovod_mpi_emulated4.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    for rank in ("0", "1", "2", "3"):
        times = [float(r["seconds"]) for r in rows if r["rank"] == rank]
        d = steady_state_start(times)
        assert 3 <= d <= len(times) // 2
        assert max(times[d:]) < 0.5 < 3.0 < min(times[:2])


def test_a_ratio_resolved_past_the_budget_gets_no_more_rounds() -> None:
    """Past the budget a ratio goes on toward ``min_rounds`` only while its verdict could
    change: once ``min_repeats`` rounds put its interval clear of 1, measuring stops (the
    interval is still wider than the target), where an unresolved one goes on."""
    clock = FakeClock()
    target = Target(rel_ci=0.001, budget_s=3.0, min_rounds=6)
    noisy = {"a": [150.0, 160.0, 140.0, 155.0, 145.0, 150.0], "b": [100.0] * 6}
    resolved = Interleaver([speedup("a", "b")], target, clock)
    _drive(resolved, clock, lambda p, i: noisy[p][i], seconds=1.0)
    j = resolved.judgements()[0]
    assert resolved.rounds == target.min_repeats < target.min_rounds
    assert j.resolved and not j.precise and j.reason == "budget"

    clock = FakeClock()
    flat = {"a": [110.0, 90.0] * 3, "b": [100.0] * 6}
    unresolved = Interleaver([speedup("a", "b")], target, clock)
    _drive(unresolved, clock, lambda p, i: flat[p][i], seconds=1.0)
    assert unresolved.rounds == target.min_rounds
    assert not unresolved.judgements()[0].resolved
