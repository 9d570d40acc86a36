"""The simulator against reality: a small trace replayed for real under a policy.

The replay runs the simulator's policy on the real clock. At every scheduling instant the
jobs that have arrived and are not finished are shown to the policy with what they hold;
a job whose allocation changed is asked to stop (its stage ends after the step in progress
and checkpoints: ``--stop-file``) and is restarted from that checkpoint on its new
devices; a job that keeps its allocation keeps running; a newly placed job is launched.
Every stage is a real ``lab.bench.easyscale`` launch on emulated hosts with its device
types' CPU quotas (``replay_stages``). A job's real JCT is the end of its last stage minus
its submit time; the simulator replays the same trace on the step times and restart cost
measured by the same runtime on the same devices, and the two are compared per job.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.easyscale.policies import JobView, Speed, get_policy
from lab.experiments.easyscale.replay_stages import (
    SMOKE_TYPES,
    WORKLOAD,
    Stage,
    reached_step,
    stage_config,
    start_stage,
)
from lab.experiments.easyscale.simulator import simulate
from lab.experiments.easyscale.steptimes import StepTimes
from lab.experiments.easyscale.trace import check_trace

log = logging.getLogger(__name__)

# Smoke: three short jobs on one device of each type; the second and third arrive while
# the first runs, so it must shrink (checkpoint and restart) and later grow again.
SMOKE_TRACE = pd.DataFrame(
    [
        ("r1", 0.0, 3, 80, "v100"),
        ("r2", 10.0, 2, 60, "v100"),
        ("r3", 20.0, 1, 60, "t4"),
    ],
    columns=["name", "submit", "ests", "steps", "preferred"],
).assign(workload=WORKLOAD, batch_size=32, heterogeneous=True)


def _views(trace: pd.DataFrame) -> dict[str, JobView]:
    return {
        r.name: JobView(
            r.name, float(r.submit), r.workload, int(r.ests), int(r.batch_size), True, r.preferred
        )
        for r in trace.itertuples()
    }


def replay(
    trace: pd.DataFrame,
    table: pd.DataFrame,
    cluster: Mapping[str, int],
    types: Mapping[str, float] = SMOKE_TYPES,
    policy: str = "easyscale-heter",
    interval_s: float = 8.0,
    results_root: str | os.PathLike[str] | None = None,
    deadline_s: float = 540.0,
) -> pd.DataFrame:
    """Run ``trace`` for real; one row per job: name, submit, finish, jct, stages, steps.

    Raises:
        ParameterError: before anything starts (a trace the simulator would refuse, a
            device type without a quota).
        NothingMeasured: a stage failed, or the trace did not finish in ``deadline_s``.
    """
    st = StepTimes(table)
    pol = get_policy(policy)
    check_trace(trace, st, cluster, gang=pol.gang)
    if set(cluster) - set(types):
        raise ParameterError("cluster", dict(cluster), f"device types among {sorted(types)}")
    if not interval_s > 0:
        raise ParameterError("interval_s", interval_s, "seconds > 0")
    speed, views = Speed(st), _views(trace)
    steps = {r.name: int(r.steps) for r in trace.itertuples()}
    done = dict.fromkeys(views, 0)
    checkpoint: dict[str, str] = {}
    stages: dict[str, list[Stage]] = {n: [] for n in views}
    finish: dict[str, float] = {}
    work = Path(tempfile.mkdtemp(prefix="distlab-replay-"))
    t0 = time.time()
    try:
        for instant in range(math.ceil(deadline_s / interval_s)):
            _sleep_until(t0 + instant * interval_s)
            now = time.time() - t0
            for name in views:
                _collect(name, stages[name], done, steps, finish, t0)
            if len(finish) == len(views):
                break
            holding = {n: s[-1].counts for n, s in stages.items() if s and s[-1].running}
            shown = [
                replace(v, counts=holding.get(n, {}))
                for n, v in views.items()
                if v.submit <= now and n not in finish
            ]
            if not shown:
                continue
            free = dict(cluster)
            for c in holding.values():
                for t, k in c.items():
                    free[t] -= k
            decided = {
                n: {t: k for t, k in c.items() if k > 0}
                for n, c in pol.schedule(shown, free, speed).items()
            }
            moving = [n for n in holding if decided.get(n, {}) != holding[n]]
            for n in moving:
                Path(stages[n][-1].cfg.stop_file).touch()
            for n in moving:
                stages[n][-1].thread.join()  # type: ignore[union-attr]
                _collect(n, stages[n], done, steps, finish, t0)
            for n, counts in decided.items():
                if not counts or n in finish or (stages[n] and stages[n][-1].running):
                    continue
                split = speed.split(views[n], counts)
                stage_dir = work / n / str(len(stages[n]))
                stage_dir.mkdir(parents=True)
                cfg = stage_config(
                    views[n].ests,
                    split,
                    steps[n] - done[n],
                    save=str(stage_dir / "ck"),
                    resume=checkpoint.get(n, ""),
                    stop_file=str(stage_dir / "stop"),
                )
                checkpoint[n] = cfg.save
                params = {"purpose": "replay", "policy": policy, "at_s": round(now, 3)}
                stages[n].append(start_stage(n, counts, split, cfg, types, params, results_root))
        else:
            raise NothingMeasured(f"the replay did not finish in {deadline_s:.0f} s")
    finally:
        for s in stages.values():
            if s and s[-1].running:
                Path(s[-1].cfg.stop_file).touch()
                s[-1].thread.join()  # type: ignore[union-attr]
        shutil.rmtree(work, ignore_errors=True)
    return pd.DataFrame(
        [
            {
                "name": n,
                "submit": v.submit,
                "finish": finish[n],
                "jct": finish[n] - v.submit,
                "stages": len(stages[n]),
                "steps": done[n],
                "placements": " → ".join(
                    "+".join(f"{t}×{k}" for t, k in s.split) for s in stages[n]
                ),
                "run_dirs": [str(s.result.run_dir) for s in stages[n]],
            }
            for n, v in views.items()
        ]
    )


def _sleep_until(when: float) -> None:
    delay = when - time.time()
    if delay > 0:
        time.sleep(delay)


def _collect(
    name: str,
    stages: list[Stage],
    done: dict[str, int],
    steps: Mapping[str, int],
    finish: dict[str, float],
    t0: float,
) -> None:
    """Take in a job's last stage if it has ended: its checkpoint step, its finish."""
    if not stages or stages[-1].running or stages[-1].taken:
        return
    stage = stages[-1]
    stage.taken = True
    if stage.error is not None or not (stage.result and stage.result.ok):
        where = stage.result.run_dir if stage.result else "no run directory"
        raise NothingMeasured(f"replay stage of {name} failed ({stage.error or where})")
    reached = reached_step(stage.result.run_dir)
    if reached is None:
        raise NothingMeasured(f"replay stage of {name} left no checkpoint")
    done[name] = reached
    if reached >= steps[name]:
        finish[name] = float(stage.ended) - t0  # type: ignore[arg-type]


def compare(
    trace: pd.DataFrame,
    real: pd.DataFrame,
    table: pd.DataFrame,
    cluster: Mapping[str, int],
    interval_s: float,
    restart_s: float,
    policy: str = "easyscale-heter",
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Real against simulated JCT per job, and the errors: mean absolute percentage error
    of the per-job JCTs, and the error of the mean JCT and of the makespan."""
    sim = simulate(
        trace,
        table,
        cluster,
        policy,
        interval_s=interval_s,
        restart_s=min(restart_s, interval_s * 0.99),
    )
    jobs = real[["name", "submit", "jct", "stages", "placements"]].merge(
        sim.jobs[["name", "jct", "restarts"]].rename(columns={"jct": "sim_jct"}), on="name"
    )
    jobs = jobs.rename(columns={"jct": "real_jct", "restarts": "sim_restarts"})
    jobs["error_pct"] = 100 * (jobs["sim_jct"] - jobs["real_jct"]) / jobs["real_jct"]
    real_span = float((real["submit"] + real["jct"]).max() - real["submit"].min())
    errors = {
        "mape_pct": float(jobs["error_pct"].abs().mean()),
        "mean_jct_real": float(jobs["real_jct"].mean()),
        "mean_jct_sim": float(jobs["sim_jct"].mean()),
        "makespan_real": real_span,
        "makespan_sim": sim.makespan,
        "restart_s": float(restart_s),
    }
    return jobs, errors
