"""Fault injection: revoke a host during a run, as a cloud revokes a transient server, and
bring up a replacement.

``launch(..., faults=[Revocation("h2", at_step=40, replace="cold", delay=2)])``. At the
given time (seconds after the processes start) or step (the number of ``step`` records the
run has printed, all ranks together: for TF parameter servers that is the global step), the
host is revoked:

- an emulated host loses its link (``ip link set <veth> down`` on the bridge side) and every
  process in its cgroup and namespace is SIGKILLed, with no warning, as a preemption;
- an SSH host has its processes ended through their guards (its link is not touched: the
  lab cannot take a remote machine's network down);
- a node of a Slurm job (a slurm profile names its hosts ``slurm-node-1`` ... in the
  job's node order) has them ended the same way, or, with ``via``, by Slurm
  (lab.cluster.slurm.revoke): ``via="scontrol"`` takes the node DOWN (Slurm ends its tasks
  and takes it out of the job; it is resumed after ``delay``, event ``restored``, so
  ``replace`` is "none"), ``via="scancel"`` cancels the job's steps on it (it stays in the
  job: a cold replacement starts there again).

The supervisor is told first, so that the killed processes' exits neither fail nor end the
run. Then, after ``delay`` seconds (the time a new server takes to be provisioned):

- ``replace="cold"``: a fresh host and process: the emulated host's link comes back up with
  the same address (a new server that got the old one's address) and the revoked processes
  are started again from scratch, with the same argv and environment;
- ``replace="warm"``: a pre-started one: at launch, a standby copy of each process starts
  on ``spare`` (an emulated host of the cluster that runs nothing else) with
  ``DISTLAB_STANDBY=<file>`` set; a workload that honours it (``lab.bench.synthetic``) loads
  its engine and waits for the file. At replacement the spare takes over the revoked host's
  address and the file is created, so the standby starts serving at once;
- ``replace="none"``: the host stays gone.

A host can be revoked again, later in the run, once its cold replacement was started (a
chief revoked after each of its checkpoints, say): a plan with several revocations of
one host lists them in order.

The plan is checked here (``check_plan``, before anything starts) and carried out by
lab.cluster.fault_injector during the run.

Events are records in the run directory, ``events.jsonl``: one JSON object per line, in the
schema of ``@lab`` event records (``kind: "event"``, ``event``, ``host``, ``time`` in epoch
seconds, ``t`` in seconds since the processes started, ``step``: the step count then):
``revoked`` (with the ranks and the number of processes killed; its time is the moment
the revocation began), ``revoked_exited`` (every revoked process has ended; how long
after), ``restored`` (a Slurm node resumed), ``replaced`` (cold or warm, when it began),
``recovered`` (the first step record of a revoked rank after the replacement, or of any
rank when the revoked host printed none, e.g. a parameter server or a TF chief),
``standby_started``, and
``standby_unused`` / ``replacement_ended`` when the run's original processes have all ended
well while a standby was never needed or a replacement still runs (it came too late to take
part): it is ended with the run, and its exit fails nothing.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lab.cluster.inventory import Cluster
from lab.cluster.launchers.base import ProcessSpec
from lab.errors import ParameterError

log = logging.getLogger(__name__)

REPLACE = ("cold", "warm", "none")
VIA = ("scontrol", "scancel")  # how Slurm takes a node away (lab.cluster.slurm.revoke)
STANDBY_ENV = "DISTLAB_STANDBY"
EVENTS_FILE = "events.jsonl"
STANDBY_MODULES = ("lab.bench.synthetic",)  # workloads that honour DISTLAB_STANDBY
LEFTOVER_GRACE = 5.0  # seconds a replacement may take to end after the rest of the run


@dataclass(frozen=True)
class Revocation:
    """One host revoked during a run.

    Args:
        host: the host's name in the cluster (it must run at least one process).
        at_time: seconds after the processes start; or
        at_step: after this many step records (all ranks together).
        replace: "cold", "warm" or "none" (see the module docstring).
        delay: seconds from the revocation until the replacement comes up.
        spare: the emulated host a warm replacement waits on.
        via: on a slurm profile, Slurm takes the node away: "scontrol" (node DOWN, then
            resumed) or "scancel" (the job's steps on it); None: the lab ends the host's
            processes.
    """

    host: str
    at_time: float | None = None
    at_step: int | None = None
    replace: str = "cold"
    delay: float = 0.0
    spare: str | None = None
    via: str | None = None


def run_steps(command: Sequence[str], np: int) -> int | None:
    """How many step records a run of ``command`` prints: (warm-up + timed steps) x ranks
    (for the ps launcher, ranks = workers and every record is one step of the model);
    None when the command does not say."""
    from lab.bench.flags import TrainingConfig, parse_command, ranks_env

    argv = list(command)
    cfg = parse_command(argv, ranks_env(np))
    if isinstance(cfg, TrainingConfig):
        return (cfg.warmup_steps + cfg.steps) * np
    values = {}
    for flag in ("--steps", "--warmup-steps"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            try:
                values[flag] = int(argv[argv.index(flag) + 1])
            except ValueError:
                return None
    if "--steps" not in values:
        return None
    return (values["--steps"] + values.get("--warmup-steps", 0)) * np


def check_plan(
    revocations: Sequence[Revocation] | None,
    cluster: Cluster,
    specs: Sequence[ProcessSpec],
    command: Sequence[str],
    np: int,
) -> tuple[Revocation, ...]:
    """Every revocation checked against the cluster and the processes the launcher built;
    ParameterError before anything starts."""
    plan = tuple(revocations or ())
    hosts = {h.name: h for h in cluster.hosts}
    busy = {s.host.name for s in specs}
    steps = run_steps(command, np) if any(r.at_step is not None for r in plan) else None
    seen: dict[str, Revocation] = {}
    for r in plan:
        if not isinstance(r, Revocation):
            raise ParameterError("faults", r, "Revocation(...) entries")
        if r.host not in busy:
            raise ParameterError("host", r.host, "a host running processes: " + ", ".join(busy))
        if r.host in seen and not _follows(seen[r.host], r):
            again = "a host revoked again: after a cold replacement, later than before"
            raise ParameterError("host", r.host, again)
        seen[r.host] = r
        host = hosts.get(r.host) or next(s.host for s in specs if s.host.name == r.host)
        emulated = bool(cluster.emulated)
        if host.is_local and not emulated:
            raise ParameterError("host", r.host, "an emulated or SSH host (not this machine)")
        if (r.at_time is None) == (r.at_step is None):
            raise ParameterError("at_time/at_step", (r.at_time, r.at_step), "exactly one of them")
        if r.at_time is not None and not (
            isinstance(r.at_time, int | float) and math.isfinite(r.at_time) and r.at_time >= 0
        ):
            raise ParameterError("at_time", r.at_time, "seconds >= 0 after the run starts")
        if r.at_step is not None:
            _check_step(r.at_step, steps)
        if r.replace not in REPLACE:
            raise ParameterError("replace", r.replace, ", ".join(REPLACE))
        if not (isinstance(r.delay, int | float) and math.isfinite(r.delay) and r.delay >= 0):
            raise ParameterError("delay", r.delay, "seconds >= 0")
        if r.replace == "warm":
            _check_warm(r, cluster, busy, command)
        _check_via(r, cluster)
    return plan


def _check_via(r: Revocation, cluster: Cluster) -> None:
    if r.via is None:
        return
    if r.via not in VIA:
        raise ParameterError("via", r.via, "None, " + ", ".join(VIA))
    if cluster.slurm is None:
        raise ParameterError("via", r.via, "None on a cluster that is not a Slurm job's")
    if r.via == "scontrol" and r.replace != "none":
        why = (
            "none with via='scontrol': a node taken DOWN leaves the job (resumed, it goes "
            "back to its partition); via='scancel' keeps it in the job for a cold replacement"
        )
        raise ParameterError("replace", r.replace, why)


def _follows(earlier: Revocation, later: Revocation) -> bool:
    """A host may be revoked again once its cold replacement runs there (the injector waits
    for it): the earlier revocation is cold, and the later one due at a later step or time,
    counted the same way."""
    if earlier.replace != "cold":
        return False
    if earlier.at_step is not None and later.at_step is not None:
        return later.at_step > earlier.at_step
    if earlier.at_time is not None and later.at_time is not None:
        return later.at_time > earlier.at_time
    return False


def _check_step(step: Any, steps: int | None) -> None:
    if not isinstance(step, int) or isinstance(step, bool) or step < 1:
        raise ParameterError("at_step", step, "an integer >= 1")
    if steps is None:
        raise ParameterError("at_step", step, "at_time: this command does not say its steps")
    if step >= steps:
        raise ParameterError("at_step", step, f"a step before the run's end (1..{steps - 1})")


def _check_warm(r: Revocation, cluster: Cluster, busy: set[str], command: Sequence[str]) -> None:
    free = [h.name for h in cluster.hosts if h.name not in busy]
    if not cluster.emulated:
        raise ParameterError("replace", "warm", "cold or none on a cluster that is not emulated")
    if r.spare not in free:
        raise ParameterError("spare", r.spare, "a host of the cluster running nothing: " + (
            ", ".join(free) or "none (add a host)"))  # fmt: skip
    if not any(m in command for m in STANDBY_MODULES):
        allowed = f"cold (a warm standby needs a workload honouring {STANDBY_ENV})"
        raise ParameterError("replace", "warm", allowed)


def plan_records(plan: Sequence[Revocation]) -> list[dict[str, Any]]:
    """The plan as the manifest records it."""
    return [asdict(r) for r in plan]


def read_events(run_dir: str | Path) -> list[dict[str, Any]]:
    """The fault events of a run, in order (empty when it had none)."""
    path = Path(run_dir) / EVENTS_FILE
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


__all__ = ["Revocation", "check_plan", "plan_records", "read_events", "run_steps"]
