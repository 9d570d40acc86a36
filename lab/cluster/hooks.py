"""What only some runs need, plugged into a launch: ``LaunchHook`` and the stock hooks.

lab.cluster.launching runs every request the same way (allocate, build, check, bring
hosts up, start, supervise, record). A run that needs more (its workload's flags checked
before launch, a fault plan carried out, an emulated cluster brought up and sampled) gives
a hook, so launching itself knows no workload, no fault and no namespace. A hook overrides
the stages it needs; the base class does nothing at each of them:

1. ``check(job, slots, launcher)``: before anything starts; raise ParameterError or
   LaunchError to refuse the run (nothing is created then);
   ``waiting(say, stop)``: where to say why the hosts are not up yet (a scheduler's
   queue: ``say("queued (reason: Resources)")`` reaches the run's view before its ranks
   exist), and the event that says the run was stopped meanwhile (the view's Stop:
   withdraw what was asked for, raise lab.errors.StoppedWaiting; lab.cluster.waiting);
2. ``hosts(cluster, launcher)``: a context that brings the hosts up and yields the cluster
   the ranks run on (an emulated cluster's namespaces), torn down after the run;
3. ``process(spec)``: each process as it will be started (e.g. inside a namespace);
4. ``manifest()``: fields the run's manifest starts with;
5. ``attach(cluster, run_dir)``: a context around the supervised run that yields what
   watches it (``During``: observers and tickers); it may add to the manifest on exit.

Hooks are values: one may serve many runs, so whatever a run needs at run time (a fault
injector, a sampler) is made in ``attach`` and belongs to that run alone.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.cluster.inventory import Cluster, Slot
from lab.cluster.launchers.base import Job, Launcher, ProcessSpec, RunObserver
from lab.cluster.supervisor import Ticker


@dataclass(frozen=True)
class During:
    """What a hook adds to a running run.

    Args:
        observers: told of the start, every line and the end (RunObserver).
        tickers: called on every turn of the supervisor's watch loop, from the thread that
            starts and ends processes (Ticker), e.g. to revoke a host.
    """

    observers: tuple[RunObserver, ...] = ()
    tickers: tuple[Ticker, ...] = ()


class LaunchHook:
    """One concern of some runs; override the stages it needs (see the module docstring)."""

    def check(self, job: Job, slots: Sequence[Slot], launcher: Launcher) -> None:
        """Refuse the run before anything starts. ``slots`` are on the cluster as named:
        an emulated one is not up yet and its hosts have no addresses, so processes built
        here (``launcher.build(job, slots)``) tell which host runs what, and only with
        launchers that need no address to build."""

    def waiting(self, say: Callable[[str], None], stop: threading.Event) -> None:
        """Where to say, while ``hosts`` waits for them, why the hosts are not up yet; and
        ``stop``, set when the run is stopped before they are (see the module docstring)."""

    def hosts(self, cluster: Cluster, launcher: Launcher) -> AbstractContextManager[Cluster]:
        """Bring the hosts up for the run and yield the cluster the ranks run on."""
        return contextlib.nullcontext(cluster)

    def process(self, spec: ProcessSpec) -> ProcessSpec:
        """A process as it will be started."""
        return spec

    def manifest(self) -> dict[str, Any]:
        """Fields the manifest starts with."""
        return {}

    def attach(self, cluster: Cluster, run_dir: Path) -> AbstractContextManager[During]:
        """A context around the supervised run, yielding what watches it."""
        return contextlib.nullcontext(During())


@dataclass(frozen=True)
class WorkloadCheck(LaunchHook):
    """A ``python -m lab.bench.<name> ...`` command's flags are parsed here, before launch,
    rather than failing in N ranks (lab.bench.flags.check_argv); other commands pass."""

    def check(self, job: Job, slots: Sequence[Slot], launcher: Launcher) -> None:
        from lab.bench.flags import check_argv, ranks_env

        check_argv(job.command, ranks_env(job.np, job.env))


@contextlib.contextmanager
def attached(hooks: Sequence[LaunchHook], cluster: Cluster, run_dir: Path) -> Iterator[During]:
    """Every hook's ``attach`` entered in order (left in reverse), their Durings as one."""
    with contextlib.ExitStack() as stack:
        parts = [stack.enter_context(h.attach(cluster, run_dir)) for h in hooks]
        yield During(
            observers=tuple(o for p in parts for o in p.observers),
            tickers=tuple(t for p in parts for t in p.tickers),
        )


__all__ = ["During", "LaunchHook", "WorkloadCheck", "attached"]
