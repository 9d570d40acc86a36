"""An emulated cluster's part in a launch, as a LaunchHook (lab.cluster.hooks).

Only a run on an emulated cluster needs its hosts made (namespaces, cgroups, shaped links),
its processes run inside them, its hosts' CPU and links sampled into the run directory,
and its CPU shares held back until the job is up. Kept here, beside the emulation it
drives, so that lab.cluster.launching knows none of it; ``cluster_hooks`` adds this hook
to every run whose cluster is emulated.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.cluster.hooks import During, LaunchHook
from lab.cluster.inventory import Cluster
from lab.cluster.launchers.base import Launcher, ProcessSpec, RunObserver


@dataclass(frozen=True)
class EmulationHook(LaunchHook):
    """Brings an emulated cluster up and down around a run, and watches its hosts."""

    @contextlib.contextmanager
    def hosts(self, cluster: Cluster, launcher: Launcher) -> Iterator[Cluster]:
        """The hosts made for the run (lab.cluster.emulation.prepare). A launcher that
        starts ranks itself over SSH (mpirun: ``needs_ssh_to_hosts``) gets an sshd in every
        host; launchers that start one process per rank do without."""
        from lab.cluster import emulation

        sshd = bool(getattr(launcher, "needs_ssh_to_hosts", False))
        with emulation.prepare(cluster, sshd=sshd) as up:
            yield up

    def process(self, spec: ProcessSpec) -> ProcessSpec:
        """A process for an emulated host runs inside its namespace and cgroup."""
        if spec.host.namespace is None:
            return spec
        from lab.cluster import emulation

        return dataclasses.replace(spec, argv=tuple(emulation.wrap_argv(spec.host, spec.argv)))

    @contextlib.contextmanager
    def attach(self, cluster: Cluster, run_dir: Path) -> Iterator[During]:
        """Hosts' CPU use and throttling sampled (hoststats.jsonl, ``hosts_cpu``), CPU and
        link use monitored (hostload.jsonl), and the startup shares' summary in the
        manifest (``cpu_shares``) when the profile starts hosts at full speed."""
        from lab.cluster import rundir
        from lab.cluster.emulation import hoststats

        emulation = cluster.extra.get("emulation") or {}
        gate = _startup_shares(emulation)
        observers = [*_host_monitor(emulation), *([gate] if gate else [])]
        try:
            with hoststats.sampling(cluster, run_dir):
                yield During(observers=tuple(observers))
        finally:
            if gate is not None:
                rundir.write_manifest(run_dir, cpu_shares=gate.summary())


def _host_monitor(emulation: dict[str, Any]) -> list[RunObserver]:
    """Emulated hosts' CPU and link use, sampled into the run directory (hostload.jsonl)."""
    if not emulation:
        return []
    from lab.cluster.emulation.monitor import HostMonitor

    return [HostMonitor(emulation)]


def _startup_shares(emulation: dict[str, Any]) -> Any:
    """Emulated hosts start at full speed and get their CPU shares once the job is up
    (lab.cluster.emulation.startup), unless the profile says ``startup: share``."""
    if not emulation or emulation.get("startup", "full") != "full":
        return None
    from lab.cluster.emulation.startup import StartupShares

    return StartupShares(emulation)


__all__ = ["EmulationHook"]
