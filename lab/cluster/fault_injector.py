"""Carrying out a fault plan (lab.cluster.faults) during one run: counting its steps,
revoking hosts when due, starting replacements and standbys, and writing the events.

A cold replacement on an emulated host starts at full speed, like every rank at a run's
start (lab.cluster.emulation.startup): the host's share stands for its accelerator, not
for the host CPU that imports TensorFlow. The share is back once the replacement is up: it
reports a step ("recovered"), or prints a ``serving`` event (a server task, whose steps
the chief reports later), or the run ends. At 0.4 of a core a replaced chief took 11-15 s to start
here, most of a smoke run's revocation cost and all of its spread."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.cluster.faults import EVENTS_FILE, LEFTOVER_GRACE, STANDBY_ENV, Revocation
from lab.cluster.inventory import Cluster
from lab.cluster.launchers.base import Line, ProcessSpec

log = logging.getLogger(__name__)


@dataclass
class _State:
    """What the injector knows about one revocation while the run goes on."""

    plan: Revocation
    revoked_at: float | None = None
    procs: list[Any] = field(default_factory=list)  # the revoked processes
    reporting: set[int] = field(default_factory=set)  # their ranks seen in step records
    standbys: list[tuple[Any, Path]] = field(default_factory=list)
    replacements: list[Any] = field(default_factory=list)  # cold ones, started by us
    replaced_at: float | None = None
    restored_at: float | None = None  # a Slurm node taken DOWN, resumed
    exited: bool = False  # every revoked process has ended ("revoked_exited")
    recovered: bool = False


class FaultInjector:
    """Carries out a checked plan during one run: a run observer (it counts step records)
    and a ticker of the supervisor (it acts from the watch loop)."""

    def __init__(self, plan: Sequence[Revocation], cluster: Cluster) -> None:
        self.cluster = cluster
        self.hosts = {h.name: h for h in cluster.hosts}
        emulation = cluster.extra.get("emulation") or {}
        self.info = emulation.get("hosts", {})
        self._full_start = emulation.get("startup", "full") == "full"
        self._cgroup_version = int(emulation.get("cgroup_version", 1))
        self.slurm_job: str | None = cluster.extra.get("slurm_job")  # (lab.cluster.slurm.revoke)
        self.slurm_job_name: str | None = cluster.extra.get("slurm_job_name")
        self.slurm_nodes: dict[str, str] = dict(cluster.extra.get("slurm_nodes") or {})
        self._lifted: dict[str, float] = {}  # host -> its share, while a replacement starts
        self.states = [_State(r) for r in plan]
        self.run_dir: Path | None = None
        self.t0 = 0.0
        self.steps = 0
        self.seen: set[int] = set()
        self._lock = threading.Lock()
        self._started = False
        self._done_at: float | None = None

    # -- observer -------------------------------------------------------------------------

    def on_start(self, run_dir: str, ranks: Sequence[int], control: Any) -> None:
        self.run_dir, self.t0 = Path(run_dir), time.time()

    def on_line(self, line: Line) -> None:
        if '"serving"' in line.text and self._lifted:
            self._on_serving(line)
        if '"step"' not in line.text:
            return
        from lab.metrics.records import parse_record

        rec = parse_record(line.text)
        if not rec or rec.get("kind") != "step":
            return
        rank = rec.get("rank", line.rank)
        with self._lock:
            self.steps += 1
            self.seen.add(rank)
            for s in self.states:
                if s.replaced_at is None or s.recovered:
                    continue
                if float(rec.get("ended_at") or s.replaced_at) < s.replaced_at:
                    continue  # a step that ended before the replacement, reported late
                if not s.reporting or rank in s.reporting:
                    s.recovered = True
                    self._restore_share(s.plan.host)
                    since = time.time() - (s.revoked_at or 0.0)
                    self._event("recovered", s.plan.host, rank=rank, seconds_since_revoked=since)

    def _on_serving(self, line: Line) -> None:
        """A replaced server task is up (its start is over): its host gets its share back.
        Its steps are reported by the chief in schedule order, seconds later."""
        from lab.metrics.records import parse_record

        rec = parse_record(line.text)
        if not rec or rec.get("kind") != "event" or rec.get("event") != "serving":
            return
        with self._lock:
            for s in self.states:
                ranks = {r for p in s.procs for r in p.spec.ranks}
                if s.replaced_at is not None and line.rank in ranks:
                    self._restore_share(s.plan.host)

    def on_end(self, state: str, exit_code: int, rank_exit_codes: Any) -> None:
        for host in list(self._lifted):
            self._restore_share(host)
        for s in self.states:  # a run never leaves a node DOWN, however it ended
            if s.plan.via == "scontrol" and s.revoked_at is not None and s.restored_at is None:
                self._resume(s, time.time())

    # -- the supervisor's ticker ----------------------------------------------------------

    def tick(self, sup: Any, now: float) -> None:
        if not self._started:
            self._started = True
            for s in self.states:
                if s.plan.replace == "warm":
                    self._start_standbys(sup, s)
        for i, s in enumerate(self.states):
            r = s.plan
            if s.revoked_at is None:
                due = (r.at_time is not None and now - self.t0 >= r.at_time) or (
                    r.at_step is not None and self.steps >= r.at_step
                )
                # a host revoked again waits until its earlier replacement was started
                waiting = any(e.plan.host == r.host and e.replaced_at is None
                              for e in self.states[:i])  # fmt: skip
                if due and not waiting:
                    self._revoke(sup, s, now)
            elif s.replaced_at is None and r.replace != "none" and now >= s.revoked_at + r.delay:
                self._replace(sup, s, now)
            elif r.via == "scontrol" and s.restored_at is None and now >= s.revoked_at + r.delay:
                self._resume(s, now)
            if s.revoked_at is not None and not s.exited:
                self._exited(s)
        self._end_leftovers(sup)

    # -- acts -----------------------------------------------------------------------------

    def _start_standbys(self, sup: Any, s: _State) -> None:
        from lab.cluster import emulation

        spare = self.hosts[s.plan.spare or ""]
        assert self.run_dir is not None
        for i, p in enumerate(self._live_on(sup, s.plan.host)):
            go = self.run_dir / f"standby-{s.plan.host}-{i}.go"
            spec = ProcessSpec(
                argv=tuple(emulation.wrap_argv(spare, _inner_argv(p.spec))),
                env={**p.spec.env, STANDBY_ENV: str(go)},
                ranks=p.spec.ranks,
                host=spare,
                role=p.spec.role,
                cwd=p.spec.cwd,
            )
            s.standbys.append((sup.spawn(spec), go))
        self._event("standby_started", s.plan.host, spare=spare.name, processes=len(s.standbys))

    def _live_on(self, sup: Any, host: str) -> list[Any]:
        standbys = {id(p) for st in self.states for p, _ in st.standbys}
        return [
            p
            for p in sup.processes()
            if self._runs_on(sup, p, host) and p.code is None and not p.revoked
            and id(p) not in standbys
        ]  # fmt: skip

    def _runs_on(self, sup: Any, proc: Any, host: str) -> bool:
        """Whether ``proc`` runs on ``host``: started there, or, in a Slurm job (srun runs
        here, its task on the node), every rank it carries placed on that node."""
        if proc.spec.host.name == host:
            return True
        node = self.slurm_nodes.get(host, host)
        ranks = proc.spec.ranks
        return bool(self.slurm_job and ranks) and all(sup.rank_hosts.get(r) == node for r in ranks)

    def _revoke(self, sup: Any, s: _State, now: float) -> None:
        from lab.cluster.emulation import revoke

        s.revoked_at = now
        s.procs = self._live_on(sup, s.plan.host)
        ranks = sorted({r for p in s.procs for r in p.spec.ranks})
        with self._lock:
            s.reporting = set(ranks) & self.seen
        for p in s.procs:
            sup.revoke(p)  # first: their exits must not end the run
        info = self.info.get(s.plan.host)
        if s.plan.via is not None:
            fields = self._revoke_in_slurm(s)
            self._event("revoked", s.plan.host, now, ranks=ranks, killed=len(s.procs), **fields)
            return
        if info:
            revoke.set_link(info["veth"], up=False)
            killed = revoke.kill_host(info["cgroup"], self.hosts[s.plan.host].namespace or "")
            link = "down"
        else:
            for p in s.procs:
                if p.popen is not None and p.popen.poll() is None:
                    p.popen.stdin.close()
                    p.popen.terminate()
            killed, link = len(s.procs), "unchanged (SSH host)"
        self._event("revoked", s.plan.host, now, ranks=ranks, killed=killed, link=link)

    def _exited(self, s: _State) -> None:
        """Once every revoked process has ended: when, and how long after the revocation
        (how fast the host, or Slurm, took them down)."""
        if any(p.code is None for p in s.procs):
            return
        s.exited = True
        last = max((p.ended or time.time() for p in s.procs), default=s.revoked_at or 0.0)
        since = round(last - (s.revoked_at or last), 3)
        self._event("revoked_exited", s.plan.host, last, seconds_since_revoked=since)

    def _revoke_in_slurm(self, s: _State) -> dict[str, Any]:
        """Slurm takes the node away (lab.cluster.slurm.revoke); what the event records."""
        from lab.cluster.slurm import revoke as slurm

        node = self.slurm_nodes.get(s.plan.host, s.plan.host)
        if s.plan.via == "scontrol":
            run = self.run_dir.name if self.run_dir else "?"
            slurm.take_down(node, slurm.reason_for(self.slurm_job_name, run))
            return {"via": "scontrol", "node": node, "state": "DOWN"}
        steps = slurm.steps_on(self.slurm_job or "", node)
        slurm.cancel_steps(steps)
        return {"via": "scancel", "node": node, "steps": steps}

    def _resume(self, s: _State, now: float) -> None:
        """A node taken DOWN comes back to its partition (not to the job)."""
        from lab.cluster.slurm import revoke as slurm

        s.restored_at = now
        node = self.slurm_nodes.get(s.plan.host, s.plan.host)
        try:
            slurm.resume(node)
        except Exception as e:  # said, never raised: the run's end must still be recorded
            log.error("could not resume Slurm node %s: %s", node, e)
            self._event("restore_failed", s.plan.host, now, node=node, error=str(e))
            return
        self._event("restored", s.plan.host, now, node=node)

    def _replace(self, sup: Any, s: _State, now: float) -> None:
        from lab.cluster.emulation import revoke

        s.replaced_at = now
        host, info = s.plan.host, self.info.get(s.plan.host)
        if s.plan.replace == "cold":
            if info:
                revoke.set_link(info["veth"], up=True)
                self._lift_share(host)
            s.replacements = [sup.spawn(p.spec) for p in s.procs]
            self._event("replaced", host, now, mode="cold", processes=len(s.procs))
            return
        spare = self.hosts[s.plan.spare or ""]
        address = self.hosts[host].address or ""
        prefix = int(str(self.cluster.extra["emulation"]["subnet"]).split("/")[1])
        others = [h.namespace for h in self.cluster.hosts if h.namespace and h is not spare]
        revoke.take_address(spare.namespace or "", address, prefix, others)
        for _, go in s.standbys:
            go.touch()
        self._event("replaced", host, now, mode="warm", spare=spare.name, processes=len(s.standbys))

    def _set_share(self, host: str, cpu: float | None) -> None:
        from lab.cluster.emulation.cgroups import CgroupDriver

        group = Path(self.info[host]["cgroup"])
        try:
            CgroupDriver(self._cgroup_version, Path("/")).set_quota(group, cpu)
        except OSError as e:  # the run may be tearing the cluster down
            log.warning("could not set %s's share: %s", host, e)

    def _lift_share(self, host: str) -> None:
        """Let a cold replacement start at full speed (module docstring)."""
        cpu = self.info.get(host, {}).get("cpu")
        if self._full_start and cpu is not None and host not in self._lifted:
            self._lifted[host] = float(cpu)
            self._set_share(host, None)

    def _restore_share(self, host: str) -> None:
        cpu = self._lifted.pop(host, None)
        if cpu is not None:
            self._set_share(host, cpu)
            self._event("share_restored", host, cpu=cpu)

    def _end_leftovers(self, sup: Any) -> None:
        """Once every original process has ended well, the run is over: a standby never
        needed, or a replacement that came too late to take part, is ended with it."""
        extra = {id(p) for st in self.states for p, _ in st.standbys}
        extra |= {id(p) for st in self.states for p in st.replacements}
        originals = [p for p in sup.processes() if id(p) not in extra and not p.revoked]
        if not originals or any(p.code != 0 for p in originals):
            return
        if self._done_at is None:
            self._done_at = time.time()
        if time.time() - self._done_at < LEFTOVER_GRACE:
            return  # a replacement ends on its own shortly after the rest
        for s in self.states:
            late = [(p, "replacement_ended") for p in s.replacements]
            if s.replaced_at is None:
                late += [(p, "standby_unused") for p, _ in s.standbys]
            for p, event in late:
                if p.code is None and not p.revoked and p.popen is not None:
                    sup.revoke(p)
                    p.popen.terminate()
                    self._event(event, s.plan.host, ranks=list(p.spec.ranks))

    def _event(self, event: str, host: str, when: float | None = None, **fields: Any) -> None:
        now = time.time() if when is None else when
        rec = {"kind": "event", "event": event, "host": host, "time": round(now, 6),
               "t": round(now - self.t0, 6), "step": self.steps, **fields}  # fmt: skip
        log.info("fault: %s", rec)
        if self.run_dir is not None:
            with open(self.run_dir / EVENTS_FILE, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(rec) + "\n")


def _inner_argv(spec: ProcessSpec) -> list[str]:
    """The command a spec runs inside its emulated host (after ``ip netns exec NS``)."""
    argv = list(spec.argv)
    for i in range(len(argv) - 3):
        if argv[i : i + 3] == ["ip", "netns", "exec"]:
            return argv[i + 4 :]
    return argv
