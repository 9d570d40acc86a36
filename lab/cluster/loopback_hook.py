"""The launch hook that runs a one-machine job of a wide-listening engine in a private
loopback namespace (lab.cluster.loopback_ns): which jobs, and what the manifest says."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

from lab.cluster.hooks import LaunchHook
from lab.cluster.inventory import Cluster
from lab.cluster.launchers.base import Launcher, ProcessSpec
from lab.cluster.loopback_ns import Namespace, Unavailable, private_loopback

log = logging.getLogger(__name__)
# launchers whose engines listen on every interface (their ``wide_listeners``)
WIDE = "wide_listeners"


def applies(cluster: Cluster, launcher: Launcher) -> bool:
    """A job of a wide-listening engine whose hosts are all this machine."""
    wide = bool(getattr(launcher, WIDE, False))
    return wide and cluster.slurm is None and bool(cluster.hosts) and cluster.is_local


class LoopbackHook(LaunchHook):
    """One run's private loopback namespace: made as the hosts come up, joined by every
    process, gone with the run. Made per run (it holds that run's namespace)."""

    def __init__(self) -> None:
        self.namespace: Namespace | None = None
        self.unavailable = ""

    @contextlib.contextmanager
    def hosts(self, cluster: Cluster, launcher: Launcher) -> Iterator[Cluster]:
        with contextlib.ExitStack() as stack:
            try:
                self.namespace = stack.enter_context(private_loopback())
            except Unavailable as e:
                self.unavailable = str(e)
                log.warning(
                    "no private network namespace here (%s): the %s job's servers listen "
                    "on every interface of this machine while it runs",
                    self.unavailable,
                    getattr(launcher, "name", "?"),
                )
            yield cluster

    def process(self, spec: ProcessSpec) -> ProcessSpec:
        if self.namespace is None or not spec.host.is_local:
            return spec
        return dataclasses.replace(spec, argv=(*self.namespace.enter_argv(), *spec.argv))

    def manifest(self) -> dict[str, Any]:
        if self.namespace is not None:
            return {"network": {"private": True, "what": self.namespace.describe()}}
        if self.unavailable:
            return {"network": {"private": False, "why": self.unavailable}}
        return {}
