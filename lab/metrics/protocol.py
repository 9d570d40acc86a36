"""A measurement protocol that can tell systems apart: steady state, stopping, interleaving.

On a shared machine one run of a point says little: the same point measured three times
gave 118, 123 and 319 img/s. So the points a figure compares are run *interleaved* (round
``r`` runs them in an order rotated by ``r``, so slow drift and other users' load fall on
every point alike), each run's warm-up is cut where the data says steady state starts, and
rounds go on until every compared quantity's 95% interval is narrower than a target or the
time budget is spent. Whether a difference is then *resolved* (its interval excludes "no
difference") is computed, and an honest "not resolved" is a result too.

Pure: no processes, no clock but the one passed in (lab.experiments.protocol_runner runs).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lab.errors import ParameterError
from lab.metrics.stats import Estimate, mean_ci, paired_ratio

KINDS = ("throughput", "speedup", "overhead")
Samples = Mapping[Hashable, Sequence[float | None]]  # point -> one value per round (None: none)


def steady_state_start(times: Sequence[float], batch: int = 1, max_fraction: float = 0.5) -> int:
    """Index of the first steady-state step of a step-time series (MSER truncation).

    MSER (White, "An effective truncation heuristic for bias reduction in simulation
    output", Simulation 69(6), 1997; MSER-5 with ``batch=5``: White, Cobb & Spratt, WSC
    2000) cuts the first ``d`` observations where ``d`` minimises the squared standard error
    of the mean of what is left, ``sum((y_i - mean_d)^2) / (n - d)^2``: cutting a slow start
    lowers the spread more than it costs in sample size, cutting steady data does not. As
    in the rule, ``d`` is searched over the first half only (``max_fraction``), so a slow
    spell late in a run is kept rather than thrown away with everything before it.

    Args:
        times: seconds per step, in step order (NaN/None entries count as steps but are
            ignored for the statistic).
        batch: MSER-m: average non-overlapping batches of ``batch`` steps first (5 for long
            series; 1 for the tens of steps of a smoke run).
        max_fraction: largest share of the series that may be cut.

    Returns:
        ``d``: steps ``times[d:]`` are steady. 0 for series too short to tell (< 4 batches).
    """
    if batch < 1:
        raise ParameterError("batch", batch, "an integer >= 1")
    if not 0 < max_fraction < 1:
        raise ParameterError("max_fraction", max_fraction, "a fraction in (0, 1)")
    ys = [math.nan if t is None else float(t) for t in times]
    means = [_mean(ys[i : i + batch]) for i in range(0, len(ys) - batch + 1, batch)]
    k = len(means)
    if k < 4:
        return 0
    best_d, best = 0, math.inf
    for d in range(int(k * max_fraction) + 1):
        tail = [y for y in means[d:] if not math.isnan(y)]
        if len(tail) < 2:
            break
        mean = math.fsum(tail) / len(tail)
        score = math.fsum((y - mean) ** 2 for y in tail) / len(tail) ** 2
        if score < best:
            best_d, best = d, score
    return best_d * batch


def _mean(xs: Sequence[float]) -> float:
    vals = [x for x in xs if not math.isnan(x)]
    return math.fsum(vals) / len(vals) if vals else math.nan


@dataclass(frozen=True)
class Target:
    """When to stop measuring.

    Args:
        rel_ci: wanted 95% half-width relative to the quantity (0.02: ±2% of a throughput
            or of a ratio; for an overhead ``1 - a/b`` it applies to ``a/b``, i.e. about ±2
            points of overhead, since 2% *of* a 3% overhead could never be reached).
        budget_s: seconds of measuring after which no new run starts.
        min_repeats: repeats before a quantity may count as precise (a t-interval from
            two values is too fragile to stop on).
        max_repeats: stop after this many rounds even if imprecise (None: no limit).
        min_rounds: rounds a ratio (speedup, overhead) still imprecise *and unresolved*
            gets even past the budget; only its points run in them. A verdict rests on a
            ratio's interval, and over three rounds (t = 4.3) one noisy round decides it:
            KungFu's Fig 9 at 1.25x was resolved in three make runs of four. A ratio whose
            interval over ``min_repeats`` or more rounds already excludes "no difference"
            gets no more rounds past the budget (sync SGD at ~3x spent 47 s of a 113-s
            notebook narrowing such an interval). The price is optional stopping: a lucky
            first three rounds can settle a verdict that five would not have, so the
            rounds left to a borderline ratio, not a clear one, are what this buys; the
            make runs' agreement on verdicts is the check. 0: the budget alone rules.
    """

    rel_ci: float = 0.02
    budget_s: float = 600.0
    min_repeats: int = 3
    max_repeats: int | None = None
    min_rounds: int = 0

    def __post_init__(self) -> None:
        if not (isinstance(self.rel_ci, int | float) and self.rel_ci > 0):
            raise ParameterError("rel_ci", self.rel_ci, "a fraction > 0, e.g. 0.02")
        if not (isinstance(self.budget_s, int | float) and self.budget_s >= 0):
            raise ParameterError("budget_s", self.budget_s, "seconds >= 0")
        if not (isinstance(self.min_repeats, int) and self.min_repeats >= 2):
            raise ParameterError("min_repeats", self.min_repeats, "an integer >= 2")
        top = self.max_repeats
        if top is not None and not (isinstance(top, int) and top >= self.min_repeats):
            raise ParameterError("max_repeats", self.max_repeats, "None or >= min_repeats")
        if not (isinstance(self.min_rounds, int) and self.min_rounds >= 0):
            raise ParameterError("min_rounds", self.min_rounds, "an integer >= 0")
        if top is not None and self.min_rounds > top:
            raise ParameterError("min_rounds", self.min_rounds, f"<= max_repeats ({top})")

    @classmethod
    def of_scale(cls, p: Mapping[str, Any]) -> Target:
        """The stopping rule from a notebook's scale parameters: ``target_rel_ci``,
        ``budget_s`` and, where the scale sets them, ``min_repeats`` and ``min_rounds``."""
        return cls(
            rel_ci=float(p["target_rel_ci"]),
            budget_s=float(p["budget_s"]),
            min_repeats=int(p.get("min_repeats", cls.min_repeats)),
            min_rounds=int(p.get("min_rounds", cls.min_rounds)),
        )


@dataclass(frozen=True)
class Compared:
    """A quantity a figure compares, defined on points (any hashable keys).

    ``throughput``: the values of point ``a``. ``speedup``: ``a / b``. ``overhead``:
    ``1 - a / b`` (``a`` with the feature, ``b`` without). Ratios are taken per round
    (stats.paired_ratio), so what a round shares cancels. ``context``: a ratio no verdict
    reads (a scaling efficiency beside the systems' comparison); like a throughput it stops
    with the budget, and gets no ``Target.min_rounds``.
    """

    kind: str
    a: Hashable
    b: Hashable | None = None
    name: str = ""
    context: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ParameterError("kind", self.kind, ", ".join(KINDS))
        if (self.kind == "throughput") != (self.b is None):
            raise ParameterError("b", self.b, "None for a throughput, a point for a ratio")
        if not self.name:
            label = str(self.a) if self.b is None else f"{self.a} vs {self.b}"
            object.__setattr__(self, "name", f"{self.kind}({label})")

    @property
    def points(self) -> tuple[Hashable, ...]:
        return (self.a,) if self.b is None else (self.a, self.b)

    @property
    def null(self) -> float | None:  # the value meaning "no difference"
        return {"throughput": None, "speedup": 1.0, "overhead": 0.0}[self.kind]

    @property
    def decisive(self) -> bool:
        """A ratio a verdict may read: what ``Target.min_rounds`` extends while unresolved."""
        return self.null is not None and not self.context

    def estimate(self, samples: Samples) -> Estimate:
        a = list(samples.get(self.a, ()))
        if self.b is None:
            return mean_ci(a)
        r = paired_ratio(a, list(samples.get(self.b, ())))
        return r if self.kind == "speedup" else Estimate(1.0 - r.mean, r.ci, r.n, r.std)

    def relative_ci(self, est: Estimate) -> float:
        """Half-width relative to the quantity (for an overhead: to the ratio ``a/b``)."""
        scale = 1.0 - est.mean if self.kind == "overhead" else est.mean
        return abs(est.ci / scale) if scale and not math.isnan(est.ci) else math.inf


def throughput(point: Hashable, name: str = "") -> Compared:
    return Compared("throughput", point, None, name)


def speedup(a: Hashable, b: Hashable, name: str = "", context: bool = False) -> Compared:  # a / b
    return Compared("speedup", a, b, name, context)


def overhead(with_: Hashable, without: Hashable, name: str = "") -> Compared:  # 1 - with/without
    return Compared("overhead", with_, without, name)


def precise(compared: Compared, samples: Samples, target: Target) -> bool:
    """The stopping rule: >= ``min_repeats`` values and a half-width within ``rel_ci``."""
    est = compared.estimate(samples)
    return est.n >= target.min_repeats and compared.relative_ci(est) <= target.rel_ci


@dataclass(frozen=True)
class Judgement:
    """What the measurements say about one compared quantity; ``sentence()`` renders it.

    ``resolved``: for a ratio or overhead, the interval excludes the null (1 or 0); for a
    throughput, the target precision was reached. ``direction``: +1/-1 when resolved above/
    below the null, else 0. ``reason``: why measuring stopped (precise, budget, repeats).
    """

    name: str
    kind: str
    estimate: Estimate
    null: float | None
    precise: bool
    resolved: bool
    direction: int
    repeats: int
    seconds: float
    target: Target
    reason: str = ""

    def sentence(self, percent: bool | None = None) -> str:
        pct = self.kind == "overhead" if percent is None else percent
        value = self.estimate.format(percent=pct)
        how = f"{self.repeats} repeats, {self.seconds / 60:.1f} min"
        if self.resolved and self.null is not None:
            side = "above" if self.direction > 0 else "below"
            null = f"{self.null:g}" if not pct else f"{self.null * 100:g}%"
            return f"{self.name} = {value} ({how}): resolved, {side} {null}"
        if self.resolved:
            return f"{self.name} = {value} ({how}): within ±{self.target.rel_ci:.0%}"
        span = max(self.target.budget_s, self.seconds)
        within = f"{span / 60:.0f} minutes" if span >= 90 else f"{span:.0f} s"
        return f"{self.name} = {value} ({how}): not resolved at this scale within {within}"


def judge(
    compared: Compared, samples: Samples, target: Target, seconds: float = 0.0, reason: str = ""
) -> Judgement:
    """Judge ``compared`` from the values measured so far (see Judgement)."""
    est = compared.estimate(samples)
    ok = precise(compared, samples, target)
    null, direction = compared.null, 0
    if null is None:
        resolved = ok
    else:
        resolved = est.n >= 2 and not math.isnan(est.ci) and abs(est.mean - null) > est.ci
        direction = (1 if est.mean > null else -1) if resolved else 0
    return Judgement(compared.name, compared.kind, est, null, ok, resolved, direction,
                     est.n, seconds, target, reason)  # fmt: skip


@dataclass
class Interleaver:
    """Yields which point to run next until every quantity is precise or the budget is spent.

    Use: ``for point in sched: sched.record(point, value, seconds)``. Round ``r`` runs the
    points of every still-imprecise quantity, in first-seen order rotated by ``r`` (with
    two points: AB, BA, AB, ...), so each point takes each position equally often. The
    first round always runs in full (so that every point has a value to judge); a later
    round starts only if it is expected (from the seconds recorded so far) to end within
    the budget, and no run starts once it is spent, so after the first round the budget
    is overrun by at most the run in progress. Past the budget, rounds go on only up to
    ``target.min_rounds`` and only for imprecise ratios that are not context and not yet
    resolved (``Target``).
    """

    compared: Sequence[Compared]
    target: Target = field(default_factory=Target)
    clock: Callable[[], float] = time.monotonic
    samples: dict[Hashable, list[float | None]] = field(init=False)
    durations: dict[Hashable, list[float]] = field(init=False)
    rounds: int = field(init=False, default=0)
    reason: str = field(init=False, default="")

    def __post_init__(self) -> None:
        if not self.compared:
            raise ParameterError("compared", self.compared, "at least one quantity")
        self.points = tuple(dict.fromkeys(p for c in self.compared for p in c.points))
        self.samples = {p: [] for p in self.points}
        self.durations = {p: [] for p in self.points}
        self._started: float | None = None

    @property
    def elapsed(self) -> float:
        return 0.0 if self._started is None else self.clock() - self._started

    def __iter__(self) -> Iterator[Hashable]:
        self._started = self.clock() if self._started is None else self._started
        while True:
            open_ = [c for c in self.compared if not precise(c, self.samples, self.target)]
            if not open_:
                self.reason = "precise"
                return
            if self.target.max_repeats is not None and self.rounds >= self.target.max_repeats:
                self.reason = "repeats"
                return
            active = self._points_of(open_)
            extend = self.rounds < self.target.min_rounds  # ratios go on past the budget
            keep = self._points_of([c for c in open_ if self._unsettled(c)]) if extend else []
            if self.rounds and self.elapsed + self._expected(active) > self.target.budget_s:
                active = keep  # the budget is spent: only those ratios' points run
                if not active:
                    self.reason = "budget"
                    return
            shift = self.rounds % len(active)
            for p in active[shift:] + active[:shift]:
                if self.rounds and self.elapsed >= self.target.budget_s and p not in keep:
                    if keep:
                        continue  # the ratios finish the round without it
                    self.reason = "budget"
                    return
                yield p
                if len(self.samples[p]) <= self.rounds:
                    self.record(p, None, 0.0)  # the caller recorded nothing: a missing value
            self.rounds += 1
            for p in self.points:  # points that sat out this round get a gap, keeping pairs
                while len(self.samples[p]) < self.rounds:
                    self.samples[p].append(None)

    def _unsettled(self, compared: Compared) -> bool:
        """A decisive ratio whose verdict more rounds could still change: fewer than
        ``min_repeats`` values, or an interval that holds the null."""
        if not compared.decisive:
            return False
        j = judge(compared, self.samples, self.target)
        return j.repeats < self.target.min_repeats or not j.resolved

    def _points_of(self, quantities: Sequence[Compared]) -> list[Hashable]:
        return [p for p in self.points if any(p in c.points for c in quantities)]

    def record(self, point: Hashable, value: float | None, seconds: float) -> None:
        """The value one run of ``point`` measured (None: it failed) and its duration."""
        if point not in self.samples:
            raise ParameterError("point", point, f"one of {list(self.points)}")
        ok = value is not None and not math.isnan(float(value))
        self.samples[point].append(float(value) if ok else None)
        self.durations[point].append(float(seconds))

    def _expected(self, active: Sequence[Hashable]) -> float:
        known = [d for p in self.points for d in self.durations[p]]
        fallback = math.fsum(known) / len(known) if known else 0.0
        return math.fsum(
            math.fsum(self.durations[p]) / len(self.durations[p]) if self.durations[p] else fallback
            for p in active
        )

    def judgements(self) -> list[Judgement]:
        """One Judgement per quantity, from everything recorded so far."""
        spent = self.elapsed
        return [judge(c, self.samples, self.target, spent, self.reason) for c in self.compared]
