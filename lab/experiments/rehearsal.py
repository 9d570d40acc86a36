"""A rehearsal's cuts: a notebook's paper parameters, cut only where one CPU machine cannot
afford them, and each cut said (DESIGN.md, "Rehearsal").

Under ``$DISTLAB_REHEARSAL`` (lab.metrics.rehearsal) a paper-scale notebook keeps its
paper's models, input sizes, systems and published comparison; what changes is what a CPU
cannot pay for: the steps of a point (a warm-up and a couple of timed steps), the per-rank
batch above a cap, the measuring budget and repeats, and each numeric sweep axis sampled at
its smallest and largest value (every system, model, arm and level stays). Every cut is a
``Cut`` printed in the notebook, written into the verdict's record and kept in this
kernel's list, so a reader sees what the rehearsal did not run.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from lab.metrics.protocol import Compared
from lab.metrics.rehearsal import Plan, active

# Axes kept whole: every system, model, arm, level ... runs at least once
CATEGORIES = frozenset(
    {"systems", "models", "arms", "levels", "devices", "settings", "modes", "mxnet_systems",
     "checkpoint_models", "model", "system"}
)  # fmt: skip
# Keys that count steps of a point, and which of the plan's budgets each takes; a point
# with a ``schedule`` (KungFu Fig 7: worker counts over time, then stop) keeps its steps,
# which only bound it (its first rehearsal stopped after 2 steps, before any resize)
STEPS = {"steps": "steps", "mxnet_steps": "steps", "worker_steps": "steps",
         "warmup_steps": "warmup_steps", "checkpoint_steps": "steps"}  # fmt: skip
BATCHES = frozenset({"batch_size"})  # per-rank batches; global ones (adaptive) are cheap
BUDGETS = frozenset({"budget_s"})
REPEATS = frozenset({"repeats", "min_rounds", "min_repeats", "scaling_rounds", "seeds"})
WORKERS = frozenset({"workers"})  # ranks of one point: sampled, and capped by memory
# The least a key is cut to in every experiment (an experiment adds its own: ``floors``):
# the protocol's interval needs two values (lab.metrics.protocol.Target.min_repeats;
# KungFu Fig 8's first rehearsal was refused)
FLOORS = {"min_repeats": 2}
# A timed schedule's shortest phase in a rehearsal (``schedule``: "SECONDS:WORKERS,...",
# KungFu Fig 7's 60-s phases, 5 min a system): a grow took ~3 s with ResNet-50 at 224 px
# in the first full rehearsal, and a step up to 3.3 s on 4 ranks, so 15 s holds both
SCHEDULE_PHASE_S = 15.0


@dataclass(frozen=True)
class Cut:
    """One parameter the rehearsal changed: its paper value, the value run, and why."""

    key: str
    paper: Any
    rehearsed: Any
    why: str

    def line(self) -> str:
        return f"rehearsal: {self.key} {self.paper!r} -> {self.rehearsed!r} ({self.why})"


_CUTS: dict[str, Cut] = {}  # this kernel's cuts, by key (a notebook runs in its own kernel)


def plan() -> Plan | None:
    """The active rehearsal's plan (None: a measurement)."""
    return active()


def _number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _cut_one(key: str, value: Any, p: Plan, floor: int = 0) -> tuple[Any, str]:
    """The rehearsed value of ``key`` and why ("" when the paper's value is kept); a step
    or repeat count is never cut below ``floor`` (what the experiment's reading needs) nor
    below ``FLOORS``."""
    floor = max(floor, FLOORS.get(key, 0))
    if key in STEPS and _number(value):
        cap = max(getattr(p, STEPS[key]), floor)
        if value > cap:
            return cap, "step budget: a CPU cannot afford the paper's steps"
    elif key in BATCHES and _number(value) and value > p.batch_cap:
        return p.batch_cap, "per-rank batch cap: memory and time on a CPU"
    elif key in BUDGETS and _number(value) and value > p.budget_s:
        return p.budget_s, "measuring budget of a rehearsal"
    elif key in REPEATS and _number(value):
        least = max(p.repeats, floor)
        if value > least:
            return least, "fewest repeats the sweep accepts: a rehearsal measures nothing"
    elif key in WORKERS:
        return _workers(value, p)
    elif key == "schedule" and isinstance(value, str):
        return _schedule(value)
    elif key not in CATEGORIES and isinstance(value, list | tuple) and len(value) > 2:
        if all(_number(v) for v in value):
            kept = sorted({min(value), max(value)})
        else:
            kept = [value[0], value[-1]]
        return type(value)(kept), "axis sampled: its smallest and largest values"
    return value, ""


def _schedule(text: str) -> tuple[str, str]:
    """A timed schedule ("0:1,60:2,...,300:stop") with its times scaled by one factor so
    its shortest phase is ``SCHEDULE_PHASE_S`` (its shape kept); unchanged if already
    shorter or not timed."""
    entries = [e.strip().partition(":") for e in text.split(",") if e.strip()]
    try:
        times = [float(at) for at, _, _ in entries]
    except ValueError:
        return text, ""
    gaps = [b - a for a, b in itertools.pairwise(times)]
    if not gaps or min(gaps) <= SCHEDULE_PHASE_S:
        return text, ""
    factor = SCHEDULE_PHASE_S / min(gaps)
    out = ",".join(f"{t * factor:g}:{rest}" for t, (_, _, rest) in zip(times, entries, strict=True))
    return out, f"timed schedule scaled by {factor:g}: its shortest phase {SCHEDULE_PHASE_S:g} s"


def _divisor_cap(paper: Any, cap: int) -> int:
    """The most ranks, at most ``cap``, that divide the paper's count: papers run powers of
    two, and a count that does not divide theirs breaks their batch splits (KungFu's
    adaptive batch of 32 over the 3 ranks memory held was refused by every rank)."""
    return max(d for d in range(1, cap + 1) if int(paper) % d == 0)


def _cap_why(memory: int, cap: int, paper: Any) -> str:
    divides = "" if cap == memory else f"; {cap}, the most that divide {paper}"
    return f"worker cap: this machine's memory holds {memory} ranks{divides}"


def _workers(value: Any, p: Plan) -> tuple[Any, str]:
    """Worker counts: a list sampled at its smallest and largest, each capped at the ranks
    this machine's memory holds (``Plan.max_workers``), to a count that divides the
    paper's (``_divisor_cap``)."""
    if _number(value):
        if value <= p.max_workers:
            return value, ""
        cap = _divisor_cap(value, p.max_workers)
        return cap, _cap_why(p.max_workers, cap, value)
    if not isinstance(value, list | tuple) or not value or not all(_number(v) for v in value):
        return value, ""
    cap = _divisor_cap(max(value), p.max_workers) if max(value) > p.max_workers else p.max_workers
    kept = sorted({min(min(value), cap), min(max(value), cap)})
    whys = []
    if len(value) > 2:
        whys.append("axis sampled: its smallest and largest values")
    if max(value) > cap:
        whys.append(_cap_why(p.max_workers, cap, max(value)))
    if list(kept) == list(value):
        return value, ""
    return type(value)(kept), "; ".join(whys)


def rehearse(
    params: Mapping[str, Any],
    p: Plan,
    prefix: str = "",
    floors: Mapping[str, int] | None = None,
) -> tuple[dict, list[Cut]]:
    """``params`` with the plan's cuts applied (nested mappings such as ``base`` too), and
    the cuts made; ``floors``: the least a key may be cut to. Pure."""
    floors = floors or {}
    out: dict[str, Any] = {}
    cuts: list[Cut] = []
    for key, value in params.items():
        name = f"{prefix}{key}"
        if key in STEPS and params.get("schedule"):
            out[key] = value  # a scheduled run's steps only bound it: its schedule stops it
            continue
        if isinstance(value, Mapping):
            out[key], inner = rehearse(value, p, f"{name}.", floors)
            cuts += inner
            continue
        out[key], why = _cut_one(str(key), value, p, floors.get(str(key), 0))
        if why:
            cuts.append(Cut(name, value, out[key], why))
    return out, cuts


def note(cuts: list[Cut]) -> None:
    """Keep ``cuts`` in this kernel's list and print each new one once."""
    for c in cuts:
        if _CUTS.get(c.key) != c:
            print(c.line())
        _CUTS[c.key] = c


def cuts() -> list[dict[str, Any]]:
    """Every cut this kernel made, as records (for the verdict and the manifest)."""
    return [asdict(c) for c in _CUTS.values()]


def _active_at(scale: str) -> Plan | None:
    """The active rehearsal's plan where it cuts: at paper scale (None: nothing is cut)."""
    p = active()
    return p if p is not None and scale == "paper" else None


def apply(
    params: Mapping[str, Any], scale: str, floors: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """``params`` as a rehearsal runs them at paper scale (unchanged otherwise), the cuts
    noted; ``floors``: the least a step or repeat count may be cut to."""
    p = _active_at(scale)
    if p is None:
        return dict(params)
    out, made = rehearse(params, p, floors=floors)
    note(made)
    return out


def scale_together(
    params: Mapping[str, Any], keys: tuple[str, ...], lead: str, to: int, scale: str
) -> dict[str, Any]:
    """``params`` with ``keys`` (step counts, or lists of them) scaled by the one factor
    that brings ``lead`` down to ``to``, in a rehearsal at paper scale (unchanged
    otherwise): counts that place events in a run (a revocation's step, a checkpoint
    interval) keep their proportions, where cutting each to the step budget alone would
    put the event after the run's end. The cuts are noted."""
    if _active_at(scale) is None or not params[lead] > to:
        return dict(params)
    factor = to / params[lead]
    out, made = dict(params), []
    for key in keys:
        value = params[key]
        if isinstance(value, list | tuple):
            out[key] = type(value)(max(1, round(v * factor)) for v in value)
        else:
            out[key] = max(1, round(value * factor))
        if out[key] != value:
            why = f"scaled with {lead} ({params[lead]} -> {to}): the run keeps its shape"
            made.append(Cut(key, value, out[key], why))
    note(made)
    return out


def replace(params: Mapping[str, Any], values: Mapping[str, Any], why: str, scale: str) -> dict:
    """``params`` with ``values`` put in, in a rehearsal at paper scale (unchanged
    otherwise): an experiment's own cut of what the plan does not know; noted with ``why``."""
    if _active_at(scale) is None:
        return dict(params)
    note([Cut(k, params[k], v, why) for k, v in values.items() if params[k] != v])
    return {**params, **values}


def _covering(
    points: Sequence[Mapping[str, Any]], keep: Callable[[Mapping[str, Any]], bool] | None
) -> list[int]:
    """The indices ``cover`` picks: those ``keep`` names, then greedily those that add the
    most values not yet run."""
    values = [{(k, repr(v)) for k, v in pt.items()} for pt in points]
    unseen = set().union(*values) if values else set()
    picked = [i for i, pt in enumerate(points) if keep is not None and keep(pt)]
    for i in picked:
        unseen -= values[i]
    while unseen:
        best = max(range(len(points)), key=lambda i: len(values[i] & unseen))
        picked.append(best)
        unseen -= values[best]
    return sorted(set(picked))


def _note_sample(before: int, after: int) -> None:
    if after < before:
        why = "sampled: every value of every key at least once"
        note([Cut("points", before, after, why)])


def cover(
    points: Sequence[Mapping[str, Any]],
    scale: str,
    keep: Callable[[Mapping[str, Any]], bool] | None = None,
) -> list[dict[str, Any]]:
    """A rehearsal's sample of a sweep's points (a product of axes, say): the points
    ``keep`` names (what a verdict compares), then few more that still run every value of
    every key at least once, picked greedily by the values each adds (a 5 x 3 x 6 product:
    5 points); every point otherwise. The cut is noted."""
    chosen = [dict(pt) for pt in points]
    if _active_at(scale) is None:
        return chosen
    picked = _covering(chosen, keep)
    _note_sample(len(chosen), len(picked))
    return [chosen[i] for i in picked]


def cover_protocol(
    points: Sequence[Mapping[str, Any]],
    keys: Sequence[Hashable],
    compared: Sequence[Compared],
    scale: str,
    keep: Callable[[Mapping[str, Any]], bool] | None = None,
) -> tuple[list[dict[str, Any]], list[Hashable], list[Compared]]:
    """``cover`` for the measurement protocol's inputs (points, their keys, the compared
    quantities): the sampled points, with every point a kept one is compared against (its
    baseline, its ideal), and only the quantities whose points all run. Unchanged outside
    a rehearsal at paper scale."""
    if _active_at(scale) is None:
        return [dict(pt) for pt in points], list(keys), list(compared)
    index = {k: i for i, k in enumerate(keys)}
    picked = set(_covering(points, keep))
    grown = True
    while grown:  # a ratio's reference point runs wherever its point does
        ran = {keys[i] for i in picked}
        needed = {index[c.b] for c in compared if c.b is not None and c.a in ran}
        grown = not needed <= picked
        picked |= needed
    ran = {keys[i] for i in picked}
    kept = [c for c in compared if c.a in ran and (c.b is None or c.b in ran)]
    order = sorted(picked)
    _note_sample(len(points), len(order))
    return [dict(points[i]) for i in order], [keys[i] for i in order], kept


def record() -> dict[str, Any] | None:
    """What a verdict's record says of the rehearsal it came from (None: a measurement)."""
    p = active()
    return None if p is None else {**p.to_dict(), "cuts": cuts()}
