"""A fault plan as a LaunchHook: checked before launch, carried out during the run.

Only the runs that revoke hosts (CM-DARE's transient servers) need this, so it is a hook
(lab.cluster.hooks) rather than a part of every launch: ``check`` is
lab.cluster.faults.check_plan against the processes the launcher builds, the manifest
records the plan under ``faults``, and each run gets its own
lab.cluster.fault_injector.FaultInjector, which both counts step records (an observer)
and acts from the supervisor's watch loop (a ticker).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.cluster.fault_injector import FaultInjector
from lab.cluster.faults import Revocation, check_plan, plan_records
from lab.cluster.hooks import During, LaunchHook
from lab.cluster.inventory import Cluster, Slot
from lab.cluster.launchers.base import Job, Launcher


@dataclass(frozen=True)
class FaultPlan(LaunchHook):
    """Hosts to revoke during a run (lab.cluster.faults.Revocation), in order; their
    events go to ``events.jsonl`` in the run directory."""

    revocations: tuple[Revocation, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "revocations", tuple(self.revocations))

    def check(self, job: Job, slots: Sequence[Slot], launcher: Launcher) -> None:
        """The plan against the processes ``launcher`` builds (which hosts run what)."""
        assert job.cluster is not None
        specs = launcher.build(job, slots)
        check_plan(self.revocations, job.cluster, specs, job.command, job.np)

    def manifest(self) -> dict[str, Any]:
        return {"faults": plan_records(self.revocations)}

    @contextlib.contextmanager
    def attach(self, cluster: Cluster, run_dir: Path) -> Iterator[During]:
        injector = FaultInjector(self.revocations, cluster)
        yield During(observers=(injector,), tickers=(injector,))


__all__ = ["FaultPlan"]
