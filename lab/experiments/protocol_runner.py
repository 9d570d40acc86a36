"""Run points under the measurement protocol (lab.metrics.protocol) until they are told apart.

``run_protocol(points, run_one, compared)`` runs the points interleaved, round after round;
each run's value is its steady-state throughput (warm-up cut per rank where the step times
say steady state starts); rounds go on until every compared quantity's interval reaches
the target or the budget is spent. The result is one row per compared quantity with its
interval, repeats, seconds spent and whether it was resolved, plus the runs behind it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lab.errors import ParameterError, RunStopped
from lab.metrics import protocol
from lab.metrics.protocol import Compared, Interleaver, Target
from lab.metrics.stats import step_times
from lab.metrics.store import load_run

log = logging.getLogger(__name__)

MEASURES = ("total", "per_rank")
# A point's key naming the phase of a run that alternates a feature off and on
# (lab.bench.alternation): points equal but for it share one run per round.
PHASE = "phase"
SUMMARY_COLUMNS = [
    "quantity", "kind", "a", "b", "value", "ci", "low", "high", "rel_ci", "repeats",
    "precise", "resolved", "direction", "reason", "seconds", "target_rel_ci", "budget_s",
    "sentence",
]  # fmt: skip
RUN_COLUMNS = [
    "point", "round", "run_dir", "ok", "value", "ranks", "steps", "steady_start", "seconds",
]  # fmt: skip


def steady_throughput(
    run_dir: str | os.PathLike[str], batch: int = 1, phase: str | None = None
) -> dict[str, Any]:
    """A run's steady-state throughput: per rank, the steps from where
    ``protocol.steady_state_start`` says steady state starts, ``sum(samples) /
    sum(seconds)`` (the rate over the steady span, not a mean of per-step rates, which
    fast steps would inflate); summed over ranks.

    Args:
        run_dir: the run.
        batch: MSER-m batch (``protocol.steady_state_start``).
        phase: of a run that alternated a feature off and on (lab.bench.alternation), the
            steady steps of this phase only; the cut is found on all steps, in step order.

    Returns:
        ``total`` and ``per_rank`` (samples/s; NaN when no step was timed), ``ranks``,
        ``steps`` (steady steps, all ranks) and ``steady_start`` (the largest cut).
    """
    steps = step_times(load_run(run_dir))
    total, kept, cut, ranks = 0.0, 0, 0, 0
    for _, group in steps.groupby("rank", sort=True):
        d = protocol.steady_state_start(group["seconds"].tolist(), batch=batch)
        steady = group.iloc[d:]
        if phase is not None:
            steady = steady[steady["phase"] == phase] if "phase" in steady else steady.iloc[:0]
        seconds = float(steady["seconds"].sum())
        if seconds <= 0 or steady["samples"].isna().all():
            continue
        total += float(steady["samples"].sum()) / seconds
        kept, cut, ranks = kept + len(steady), max(cut, d), ranks + 1
    nan = math.nan
    return {
        "total": total if ranks else nan,
        "per_rank": total / ranks if ranks else nan,
        "ranks": ranks,
        "steps": kept,
        "steady_start": cut,
    }


def _run_dir(outcome: Any) -> tuple[Path | None, bool]:
    """(run directory, succeeded) from a RunResult or a run directory path."""
    if outcome is None:
        return None, False
    if isinstance(outcome, str | os.PathLike):
        return Path(outcome), True
    run_dir = getattr(outcome, "run_dir", None)
    return (Path(run_dir) if run_dir else None), bool(getattr(outcome, "ok", True))


def run_protocol(
    points: Sequence[Mapping[str, Any]],
    run_one: Callable[[Mapping[str, Any]], Any],
    compared: Sequence[Compared] | None = None,
    target: Target | None = None,
    keys: Sequence[Hashable] | None = None,
    measure: str = "total",
    clock: Callable[[], float] = time.monotonic,
) -> pd.DataFrame:
    """Run ``points`` interleaved until every compared quantity is precise or time is up.

    Args:
        points: the points (dicts), e.g. lab.experiments.grid(...). Points that differ
            only in ``phase`` are phases of one run (lab.bench.alternation): each round
            launches it once (without ``phase``), and each point's value is its phase's
            steady throughput in that run, so their ratio is paired within the run.
        run_one: runs one point and returns its RunResult (as lab.experiments.run_point
            does) or its run directory; a failed run (``ok`` False, or a LabError other
            than ParameterError, or an OSError) is recorded as a missing value.
        compared: the quantities, naming points by key (protocol.throughput/speedup/
            overhead); default: the throughput of every point. Points run in the order
            they first appear here, rotated each round.
        target: the stopping rule (precision, budget seconds, repeats).
        keys: a name per point (default: its index 0, 1, ...).
        measure: ``"total"`` (sum over ranks) or ``"per_rank"`` throughput per run.
        clock: seconds, for the budget.

    Returns:
        One row per quantity, columns SUMMARY_COLUMNS: ``value`` ± ``ci`` (95%; ``low``,
        ``high``, ``rel_ci``), ``repeats`` (values behind it), ``precise`` (target reached),
        ``resolved`` (ratio/overhead: interval excludes 1/0; throughput: precise),
        ``direction`` (+1/-1/0), ``reason`` the rounds stopped (precise, budget, repeats),
        ``seconds`` spent in all, the target, and ``sentence`` for a verdict.
        ``df.attrs["runs"]``: one row per run (RUN_COLUMNS).
    """
    from lab.errors import LabError

    if measure not in MEASURES:
        raise ParameterError("measure", measure, ", ".join(MEASURES))
    names = list(range(len(points))) if keys is None else list(keys)
    if len(names) != len(points) or len(set(names)) != len(names):
        raise ParameterError("keys", keys, f"{len(points)} distinct names, one per point")
    by_key = dict(zip(names, points, strict=True))
    compared = list(compared or [protocol.throughput(k) for k in names])
    for c in compared:
        for p in c.points:
            if p not in by_key:
                raise ParameterError(f"{c.name}: point", p, f"one of {names}")
    sched = Interleaver(compared, target or Target(), clock)
    runs: list[dict[str, Any]] = []
    launched: dict[str, tuple[int, Any]] = {}  # a phased launch -> (its round, its outcome)
    for key in sched:
        point = by_key[key]
        phase = point.get(PHASE)
        launch = {k: v for k, v in point.items() if k != PHASE}
        ident = json.dumps(launch, sort_keys=True, default=str)
        started = clock()
        if phase is not None and launched.get(ident, (-1, None))[0] == sched.rounds:
            outcome = launched[ident][1]  # this round's run of the launch holds this phase too
        else:
            try:
                outcome = run_one(launch)
            except (ParameterError, RunStopped):
                raise  # bad input is the caller's to fix, a stop the person's: no failed run
            except (LabError, OSError) as exc:
                log.warning("point %r failed: %s", key, exc)
                outcome = None
            if phase is not None:
                launched[ident] = (sched.rounds, outcome)
        seconds = clock() - started
        run_dir, ok = _run_dir(outcome)
        row = {"point": key, "round": sched.rounds, "run_dir": str(run_dir or ""), "ok": ok}
        value = math.nan
        if ok and run_dir is not None:
            found = steady_throughput(run_dir, phase=phase)
            value = found[measure]
            row.update(ranks=found["ranks"], steps=found["steps"])
            row["steady_start"] = found["steady_start"]
        sched.record(key, None if math.isnan(value) else value, seconds)
        runs.append({**row, "value": value, "seconds": seconds})
    table = pd.DataFrame([_row(j, c) for j, c in zip(sched.judgements(), compared, strict=True)])
    table = table.reindex(columns=SUMMARY_COLUMNS)
    table.attrs["runs"] = pd.DataFrame(runs).reindex(columns=RUN_COLUMNS)
    return table


def _row(j: protocol.Judgement, c: Compared) -> dict[str, Any]:
    est = j.estimate
    return {
        "quantity": j.name,
        "kind": j.kind,
        "a": c.a,
        "b": c.b,
        "value": est.mean,
        "ci": est.ci,
        "low": est.low,
        "high": est.high,
        "rel_ci": c.relative_ci(est),
        "repeats": j.repeats,
        "precise": j.precise,
        "resolved": j.resolved,
        "direction": j.direction,
        "reason": j.reason,
        "seconds": j.seconds,
        "target_rel_ci": j.target.rel_ci,
        "budget_s": j.target.budget_s,
        "sentence": j.sentence(),
    }
