"""A trace-driven simulator of a cluster of typed devices under one scheduling policy.

Time advances by the scheduling interval (the paper's simulator: 60 s). At each instant
the jobs that have arrived and are not finished are shown to the policy, which says what
each holds until the next instant; a job then trains at the step time its allocation has
in the measured step-time table (``Speed``). A job whose allocation changed first spends
``restart_s`` restarting (checkpoint and relaunch), without progress. A job finishing
inside an interval finishes at that exact moment; its devices are free at the next
instant, when a scheduler would see them. JCT is finish minus submit; makespan is the
last finish minus the first submit.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from lab.errors import ParameterError
from lab.experiments.easyscale.policies import JobView, Policy, Speed, get_policy
from lab.experiments.easyscale.steptimes import StepTimes
from lab.experiments.easyscale.trace import check_trace

log = logging.getLogger(__name__)

# The paper's cluster (§5.2): 32 V100, 16 P100 and 16 T4 GPUs.
PAPER_CLUSTER: dict[str, int] = {"v100": 32, "p100": 16, "t4": 16}


@dataclass(frozen=True)
class SimResult:
    """What one simulation gives.

    Attributes:
        policy: the policy's label.
        jobs: one row per job: name, workload, ests, submit, start, finish, jct, restarts,
            max_devices, device_types (types it ever held), mixed_instants (scheduling
            instants at which it held more than one type).
        allocation: devices held per type after each scheduling instant: time,
            device_type, devices.
    """

    policy: str
    jobs: pd.DataFrame
    allocation: pd.DataFrame
    interval_s: float

    @property
    def mean_jct(self) -> float:
        return float(self.jobs["jct"].mean())

    @property
    def makespan(self) -> float:
        return makespan(self.jobs)


def makespan(jobs: pd.DataFrame) -> float:
    """Last finish minus first submit, from a table with ``submit`` and ``finish``."""
    return float(jobs["finish"].max() - jobs["submit"].min())


def simulate(
    trace: pd.DataFrame,
    table: StepTimes | pd.DataFrame,
    cluster: Mapping[str, int] = PAPER_CLUSTER,
    policy: str | Policy = "easyscale-heter",
    interval_s: float = 60.0,
    restart_s: float = 0.0,
    max_instants: int = 100_000,
) -> SimResult:
    """Replay ``trace`` on ``cluster`` under ``policy``.

    Args:
        trace: jobs (``lab.experiments.easyscale.trace`` columns).
        table: measured step times (``StepTimes`` or its DataFrame).
        cluster: devices per type, e.g. ``PAPER_CLUSTER``.
        policy: a policy or its name (``yarn-cs``, ``easyscale-homo``, ``easyscale-heter``).
        interval_s: seconds between scheduling instants.
        restart_s: seconds without progress after a job's allocation changes.
        max_instants: a guard against a policy that never finishes the trace.
    """
    st = table if isinstance(table, StepTimes) else StepTimes(table)
    pol = get_policy(policy)
    if not interval_s > 0:
        raise ParameterError("interval_s", interval_s, "seconds > 0")
    if restart_s < 0 or restart_s >= interval_s:
        raise ParameterError("restart_s", restart_s, f"seconds in [0, interval_s={interval_s})")
    check_trace(trace, st, cluster, gang=pol.gang)
    speed = Speed(st)
    views = {
        r.name: JobView(
            r.name,
            float(r.submit),
            r.workload,
            int(r.ests),
            int(r.batch_size),
            bool(r.heterogeneous),
            r.preferred,
        )
        for r in trace.itertuples()
    }
    left = {r.name: float(r.steps) for r in trace.itertuples()}
    start: dict[str, float] = {}
    finish: dict[str, float] = {}
    restarts = dict.fromkeys(views, 0)
    widest = dict.fromkeys(views, 0)
    mixed = dict.fromkeys(views, 0)
    types_held: dict[str, set[str]] = {n: set() for n in views}
    holding: dict[str, dict[str, int]] = {}
    alloc_rows: list[tuple[float, str, int]] = []
    now = math.floor(min(v.submit for v in views.values()) / interval_s) * interval_s
    for _ in range(max_instants):
        if len(finish) == len(views):
            break
        holding = {n: c for n, c in holding.items() if n not in finish}
        waiting = [v for v in views.values() if v.submit <= now and v.name not in finish]
        if not waiting:
            nxt = min(v.submit for n, v in views.items() if n not in finish)
            now = math.ceil(nxt / interval_s) * interval_s
            continue
        free = dict(cluster)
        for c in holding.values():
            for t, n in c.items():
                free[t] -= n
        shown = [replace(v, counts=holding.get(v.name, {})) for v in waiting]
        decided = {
            n: {t: k for t, k in c.items() if k > 0}
            for n, c in pol.schedule(shown, free, speed).items()
        }
        _check_allocation(decided, cluster, views)
        for t in cluster:
            alloc_rows.append((now, t, sum(c.get(t, 0) for c in decided.values())))
        for name, counts in decided.items():
            if not counts:
                continue
            changed = counts != holding.get(name)
            if changed:
                restarts[name] += name in start
                start.setdefault(name, now)
            widest[name] = max(widest[name], sum(counts.values()))
            types_held[name] |= set(counts)
            mixed[name] += len(counts) > 1
            pause = restart_s if changed else 0.0
            step = speed.step_seconds(views[name], counts)
            possible = (interval_s - pause) / step
            if left[name] <= possible + 1e-9:
                finish[name] = now + pause + left[name] * step
                left[name] = 0.0
            else:
                left[name] -= possible
        holding = {n: c for n, c in decided.items() if c}
        now += interval_s
    else:
        raise RuntimeError(f"{pol.label} did not finish the trace in {max_instants} instants")
    jobs = pd.DataFrame(
        [
            {
                "name": n,
                "workload": v.workload,
                "ests": v.ests,
                "submit": v.submit,
                "start": start[n],
                "finish": finish[n],
                "jct": finish[n] - v.submit,
                "restarts": restarts[n],
                "max_devices": widest[n],
                "device_types": "+".join(sorted(types_held[n])),
                "mixed_instants": mixed[n],
            }
            for n, v in views.items()
        ]
    )
    allocation = pd.DataFrame(alloc_rows, columns=["time", "device_type", "devices"])
    return SimResult(pol.label, jobs, allocation, float(interval_s))


def _check_allocation(
    decided: Mapping[str, Mapping[str, int]],
    cluster: Mapping[str, int],
    views: Mapping[str, JobView],
) -> None:
    """A policy's answer must fit the cluster and give no job more devices than ESTs."""
    for t, n in cluster.items():
        used = sum(c.get(t, 0) for c in decided.values())
        if used > n:
            raise RuntimeError(f"policy allocated {used} {t} of {n}")
    for name, c in decided.items():
        if set(c) - set(cluster) or sum(c.values()) > views[name].ests:
            raise RuntimeError(f"policy gave {name} {dict(c)} (ESTs {views[name].ests})")


def compare_policies(
    trace: pd.DataFrame,
    table: StepTimes | pd.DataFrame,
    cluster: Mapping[str, int] = PAPER_CLUSTER,
    policies: Sequence[str | Policy] = ("yarn-cs", "easyscale-homo", "easyscale-heter"),
    interval_s: float = 60.0,
    restart_s: float = 0.0,
) -> tuple[pd.DataFrame, dict[str, SimResult]]:
    """Every policy on the same trace: a summary (policy, mean_jct, makespan, ...) and
    each policy's SimResult, by label."""
    st = table if isinstance(table, StepTimes) else StepTimes(table)
    results = {}
    for p in policies:
        r = simulate(trace, st, cluster, p, interval_s=interval_s, restart_s=restart_s)
        results[r.policy] = r
    summary = pd.DataFrame(
        [
            {
                "policy": label,
                "mean_jct": r.mean_jct,
                "makespan": r.makespan,
                "interval_s": interval_s,
                "cluster": cluster_name(cluster),
                "jobs": len(r.jobs),
            }
            for label, r in results.items()
        ]
    )
    return summary, results


def cluster_name(cluster: Mapping[str, int]) -> str:
    """``32 v100 + 16 p100 + 16 t4``."""
    return " + ".join(f"{n} {t}" for t, n in cluster.items() if n > 0)


def sweep(
    trace: pd.DataFrame,
    table: StepTimes | pd.DataFrame,
    clusters: Sequence[Mapping[str, int]] = (PAPER_CLUSTER,),
    intervals_s: Sequence[float] = (60.0,),
    restart_s: float = 0.0,
) -> pd.DataFrame:
    """``compare_policies`` over cluster mixes × scheduling intervals, one row per
    (cluster, interval, policy)."""
    st = table if isinstance(table, StepTimes) else StepTimes(table)
    frames = [
        compare_policies(trace, st, c, interval_s=i, restart_s=min(restart_s, i / 2))[0]
        for c in clusters
        for i in intervals_s
    ]
    return pd.concat(frames, ignore_index=True)
