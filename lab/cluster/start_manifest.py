"""What a run's manifest starts with: the request as run (command, launcher, options,
the cluster as it was up, the slots), who launched it where, with which versions, and each
hook's fields; written before any process starts (lab.cluster.launching), and for a run
stopped before its start too (lab.cluster.waiting)."""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
from collections.abc import Sequence
from typing import Any

from lab.cluster import rundir
from lab.cluster.hooks import LaunchHook
from lab.cluster.inventory import Cluster, Slot
from lab.cluster.launchers.base import Job
from lab.cluster.request import LaunchRequest, env_defaults
from lab.cluster.secret_env import redact
from lab.metrics import rehearsal
from lab.metrics.layout import EXECUTION_ENV
from lab.metrics.machine import hardware_description


def start_manifest(
    request: LaunchRequest,
    job: Job,
    cluster: Cluster,
    slots: Sequence[Slot],
    hooks: Sequence[LaunchHook],
    insecure: dict[str, Any] | None,
) -> dict[str, Any]:
    """The fields a run's manifest starts with (secret values as ``<secret>``)."""
    manifest = {
        **manifest_fields(job, request.launcher, cluster, slots),
        "env_defaults": env_defaults(request.env),
    }
    if insecure:
        manifest["ssh"] = insecure
    plan = rehearsal.active()
    if plan is not None:  # never a measurement (lab.metrics.rehearsal)
        manifest["rehearsal"] = plan.to_dict()
    for hook in hooks:
        manifest.update(hook.manifest())
    if job.secret_env:  # values as "<secret>" (lab.cluster.secret_env)
        manifest = {**redact(manifest, request.secrets), "secret_env": sorted(job.secret_env)}
    return manifest


def manifest_fields(job: Job, launcher: str, cluster: Cluster, slots: Sequence[Slot]) -> dict:
    """The job as run and where it was launched from (the hooks add theirs)."""
    return {
        "experiment": job.experiment,
        "params": dict(job.params),
        "launcher": launcher,
        "options": dict(job.options),
        "np": job.np,
        "command": list(job.command),
        "env": dict(job.env),
        "cluster": {
            "name": cluster.name,
            "emulated": cluster.emulated,
            "hosts": [dataclasses.asdict(h) for h in cluster.hosts],
            "emulation": cluster.extra.get("emulation"),  # cgroups, links, fair settings
        },
        "slots": [{"rank": s.rank, "host": s.host.name, "local_rank": s.local_rank} for s in slots],
        "launched_by": {
            "argv": list(sys.argv),
            "pid": os.getpid(),
            "cwd": os.getcwd(),
            "execution": os.environ.get(EXECUTION_ENV),  # the batch notebook run, if any
        },
        "versions": rundir.package_versions(),  # of the launching machine
        "launched_on": {"host": platform.node(), "hardware": hardware_description()},
    }


__all__ = ["manifest_fields", "start_manifest"]
