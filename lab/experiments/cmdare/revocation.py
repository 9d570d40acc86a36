"""Revocations during real asynchronous TF parameter-server training on emulated hosts.

One emulated cluster per point: workers on h1 and h2, the parameter server on h3, the chief
(which writes the checkpoints) on h4, and a spare h5 for warm replacements. Three kinds of
point, each one run of ``lab.bench.synthetic --backend ps``:

- ``worker``: h2 is revoked at a global step and replaced cold or warm
  (lab.cluster.faults); the run's step end times give the throughput timeline;
- ``chief``: the chief checkpoints every ``checkpoint_every`` global steps and is revoked
  ``since`` steps after one; its cold replacement restores the checkpoint, so the job
  redoes the steps since it. One run revokes the chief once per ``since``, after
  successive checkpoints (the i-th ``since`` steps after checkpoint i + 1), so the job
  starts its processes once;
- ``checkpoint``: one worker, a checkpoint at every step, per model: checkpoint duration
  vs size, the data of CM-DARE's checkpoint model.
"""

from __future__ import annotations

import math
import sys
import tempfile
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.sweeps import room_sweep

if TYPE_CHECKING:
    from lab.bench.synthetic import Config as SyntheticConfig

SCALES: dict[str, dict[str, Any]] = {
    # smoke: a worker is revoked ~8 s after the first step (the rate before is taken over
    # the steady seconds before it) and the survivor has ~335 steps left (~14 s; a cold
    # replacement, started at full speed, ran its first step ~6 s after, and the rate was
    # back at 95% 7.4-8.3 s after; 425 steps left ran ~4 s past that). A chief run revokes
    # the chief after successive checkpoints, one revocation per ``since`` (separate runs
    # started the processes, ~11 s, once each), and ends ``chief_after`` global steps after
    # the job is back at the step the last had reached: the steps after that measured
    # nothing. Chief revocations 25-275 steps after a checkpoint every 300 fitted the
    # redone steps with R^2 0.96-1.00 (bar 0.8); every 250 with
    # 25-225 saves ~2 s a run for a fifth less range. A checkpoint run checkpoints every
    # step: 4 steps gave 5 timed checkpoints a model, whose means the line met with R^2
    # 0.99-1.00 over four make runs (MobileNet's 2.93 s ± 0.12); 2 gave 3 (R^2 0.99-1.00
    # in three more), 1 gives 2 and saves MobileNet's ~5.4 s step and a checkpoint
    "smoke": {"model": "tiny_cnn", "batch_size": 32, "chief_after": 40, "worker_steps": 560,
              "cpu": 0.4, "checkpoint_every": 250, "revoke_at": 450, "delay": 1.0,
              "timeout": 240, "checkpoint_steps": 1, "chief_grace": 60.0,
              "checkpoint_link": "100mbit"},
    "paper": {"model": "cifar_resnet32", "batch_size": 128, "chief_after": 200,
              "worker_steps": 4000, "cpu": 1.0, "checkpoint_every": 2000, "revoke_at": 2000,
              "delay": 30.0, "timeout": 3600, "checkpoint_steps": 10, "chief_grace": 300.0,
              "checkpoint_link": "100mbit"},
}  # fmt: skip
# A rehearsal keeps a run's shape at the smoke run's length (which measured a replacement's
# return, ~6-8 s after a revocation): the step counts that place its events are scaled by
# one factor, and the replacement delay is the smoke run's
SHAPE = ("worker_steps", "revoke_at", "checkpoint_every", "chief_after", "since")
LINE_POINTS = 3  # revocations the chief verdict's line needs (revocation_verdicts)
KINDS = ("worker", "chief", "checkpoint")
WARMUP = 2  # warm-up steps per worker
WORKERS = 2  # of a worker or chief run: h1 and h2 (a checkpoint run has one)
MODES = ("cold", "warm")
EXPERIMENT = "cmdare/revocation"
KEY = ["kind", "mode", "since", "model", "scale"]


def _cluster(hosts: int, cpu: float, link: str) -> Any:
    from lab.cluster.inventory import cluster_from_dict

    spec = {"hosts": hosts, "slots": 1, "cpu": cpu, "link": {"bandwidth": link}}
    return cluster_from_dict({"name": f"cmdare-revocation-{hosts}", "emulated": spec}, "x")


def check_cluster(cluster: Any) -> None:
    """Every point builds its own emulated hosts (their shares and links are part of the
    experiment); other clusters are refused before anything starts."""
    if cluster != "emulated":
        raise ParameterError("cluster", cluster, "'emulated' (each point builds its own hosts)")


def settings(scale: str, since: Iterable[int] = ()) -> dict[str, Any]:
    """The scale's settings as they run, with ``since`` (the chief's revocations, steps
    after a checkpoint): a rehearsal scales the step counts that place the run's events
    together (``SHAPE``), takes the smoke run's replacement delay, samples ``since`` to
    ``LINE_POINTS`` and cuts the rest as every rehearsal does (lab.experiments.rehearsal);
    unchanged otherwise."""
    from lab.experiments import rehearsal

    if scale not in SCALES:
        raise ParameterError("scale", scale, ", ".join(SCALES))
    smoke = SCALES["smoke"]
    s = {**SCALES[scale], "since": list(since)}
    s = rehearsal.scale_together(s, SHAPE, "worker_steps", smoke["worker_steps"], scale)
    s = rehearsal.replace(s, {"delay": smoke["delay"]}, "replacement delay of the smoke run, "
                          "whose survivor outlasts it", scale)  # fmt: skip
    # a checkpoint run's worker pulls and pushes the whole model each step: ResNet-50's
    # 190 MB took 16 s a step at 100 Mbit/s in a rehearsal (the link's time, not the CPU's)
    s = rehearsal.replace(s, {"checkpoint_link": "1gbit"}, "a checkpoint run's link: what it "
                          "times is the checkpoint, not the pulls", scale)  # fmt: skip
    after = s["since"]
    if len(after) > LINE_POINTS:  # the chief run's four revocations took 240 s of 590
        three = [after[0], after[len(after) // 2], after[-1]]
        s = rehearsal.replace(s, {"since": three}, "sampled to the three a line needs", scale)
    shape = {k: s.pop(k) for k in SHAPE}  # cut already
    return {**rehearsal.apply(s, scale), **shape}


def points(
    modes: Iterable[str], since: Iterable[int], models: Iterable[str], scale: str = "smoke"
) -> list[dict[str, Any]]:
    """The sweep's points, checked: one worker revocation per mode, one chief run revoking
    the chief once per ``since`` (steps after a checkpoint; its ``since``: the steps joined
    by "+"), one checkpoint run per model."""
    from lab.bench.models import get_spec

    s = settings(scale, since)
    every, since = s["checkpoint_every"], s["since"]
    out: list[dict[str, Any]] = []
    for mode in modes:
        if mode not in MODES:
            raise ParameterError("modes", mode, ", ".join(MODES))
        out.append({"kind": "worker", "mode": mode, "since": 0, "model": "", "scale": scale})
    for n in since:
        if not isinstance(n, int) or isinstance(n, bool) or not 0 < n < every:
            raise ParameterError("since", n, f"steps after a checkpoint, 1..{every - 1}")
    if since:
        out.append({"kind": "chief", "mode": "cold", "since": "+".join(map(str, since)),
                    "model": "", "scale": scale})  # fmt: skip
    for m in models:
        name = get_spec(m).name
        out.append({"kind": "checkpoint", "mode": "", "since": 0, "model": name, "scale": scale})
    return out


def sinces(point: Mapping[str, Any]) -> list[int]:
    """A chief point's steps after a checkpoint, one per revocation, in order."""
    return [int(x) for x in str(point["since"]).split("+")]


def chief_steps(point: Mapping[str, Any], workers: int) -> int:
    """Steps per worker of a chief-revocation run: the ps chief schedules
    ``(warm-up + steps) x workers`` global steps, and the run needs only to get back to the
    step its last revocation had reached (checkpoint n + since) and ``chief_after``
    beyond it. The fault plan's check counts the scheduled steps, not the redone ones that
    the injector also counts (``chief_revocations``): the last revocation's count must
    fall within them."""
    s = settings(point["scale"])
    after = sinces(point)
    needed = s["checkpoint_every"] * len(after) + after[-1] + s["chief_after"]
    last = chief_revocations(point, s)[-1].at_step or 0
    return math.ceil(max(needed, last + 1) / workers) - WARMUP


def chief_revocations(point: Mapping[str, Any], s: Mapping[str, Any]) -> list[Any]:
    """The chief run's fault plan: the i-th revocation ``since[i]`` global steps after
    checkpoint i + 1. The injector counts step records (lab.cluster.faults), and the
    restarted chief prints a redone step's record again, so the count is the global step
    plus the steps redone before. (A revoked *worker* would stall the count instead: the
    chief prints in schedule order and waits for the lost worker's step; a chief's
    revocation leaves the workers' steps alone.)"""
    from lab.cluster.faults import Revocation

    every, plan, redone = int(s["checkpoint_every"]), [], 0
    for i, since in enumerate(sinces(point)):
        at = every * (i + 1) + since + redone
        plan.append(Revocation("h4", at_step=at, replace="cold", delay=s["delay"]))
        redone += since
    return plan


def workload_config(point: Mapping[str, Any], checkpoint_dir: str) -> SyntheticConfig:
    """The ranks' ``lab.bench.synthetic --backend ps`` config of a point, checked: a
    checkpoint run checkpoints every step, a chief run every ``checkpoint_every`` global
    steps (and the servers wait up to ``chief_grace`` s for the chief's replacement)."""
    from lab.bench.synthetic import Config

    s = settings(point["scale"])
    kind = point["kind"]
    if kind not in KINDS:
        raise ParameterError("kind", kind, ", ".join(KINDS))
    values: dict[str, Any] = {
        "backend": "ps",
        "model": point["model"] or s["model"],
        "batch_size": 8 if kind == "checkpoint" else s["batch_size"],
        "warmup_steps": WARMUP,
        "image_size": 32,
    }
    if kind == "checkpoint":
        values |= {"steps": s["checkpoint_steps"], "checkpoint_every": 1}
    elif kind == "worker":
        values["steps"] = s["worker_steps"]
    else:
        values |= {"steps": chief_steps(point, WORKERS), "checkpoint_every": s["checkpoint_every"]}
        values["chief_grace"] = s["chief_grace"]
    if kind != "worker":
        values["checkpoint_dir"] = checkpoint_dir
    return Config.from_values(values)


def launch_point(point: Mapping[str, Any], view: Any = "auto") -> Any:
    """Run one point; its RunResult (not raising when the run failed)."""
    from lab.cluster import launch
    from lab.cluster.faults import Revocation

    s = settings(point["scale"])
    kind = point["kind"]
    with tempfile.TemporaryDirectory(prefix="distlab-ckpt-") as ckpt:
        cfg = workload_config(point, ckpt)
        faults: list[Any] = []
        if kind == "checkpoint":
            workers, hosts, link = 1, 3, s["checkpoint_link"]
            options = {"num_ps": 1, "ps_hosts": ["h2"], "chief_host": "h3"}
        else:
            workers, hosts, link = WORKERS, 5 if point["mode"] == "warm" else 4, "1gbit"
            options = {"num_ps": 1, "ps_hosts": ["h3"], "chief_host": "h4"}
            if kind == "worker":
                faults = [Revocation("h2", at_step=s["revoke_at"], replace=point["mode"],
                                     delay=s["delay"], spare="h5" if point["mode"] == "warm"
                                     else None)]  # fmt: skip
            else:
                faults = chief_revocations(point, s)
        return launch(
            cfg.command(sys.executable),
            np=workers,
            launcher="ps",
            cluster=_cluster(hosts, s["cpu"], link),
            experiment=EXPERIMENT,
            options=options,
            params={**point, "workload_model": cfg.model},
            faults=faults,
            view=view,
            timeout=s["timeout"] * max(1, len(faults)),  # the scale's is per revocation
            check=False,
        )


# every point, resumably, through the lab's one run_sweep; the succeeded runs' summary
run_sweep = room_sweep(EXPERIMENT, launch_point, KEY)


def records(run_dir: str) -> Any:
    """One run's records (lab.metrics.load_run)."""
    from lab.metrics import load_run

    return load_run(run_dir)


def steps_of(run_dir: str) -> Any:
    """The run's training steps with their end times (and global steps)."""
    df = records(run_dir)
    steps = df[(df["kind"] == "step") & df["ended_at"].notna()]
    return steps[["ended_at", "global_step", "rank"]].astype(float).reset_index(drop=True)


def revoked_at(run_dir: str) -> dict[str, float]:
    """Epoch seconds of each fault event of the run (first of each kind)."""
    from lab.cluster.faults import read_events

    out: dict[str, float] = {}
    for e in read_events(run_dir):
        out.setdefault(e["event"], float(e["time"]))
    if "revoked" not in out:
        raise NothingMeasured(f"{run_dir}: no revocation happened")
    return out
