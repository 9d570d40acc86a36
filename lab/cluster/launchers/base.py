"""The one interface every launcher keeps, and the registry that names them.

A launcher is pure: from a Job and its Slots it builds the processes to start (argv + env
+ where), and it knows how to tell which rank a line of their output came from. Only
lab.cluster.supervisor starts, watches and ends processes.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from lab.cluster.inventory import Cluster, Host, Slot


@dataclass(frozen=True)
class Job:
    """What to run and how many copies: the launcher-independent half of a launch.

    Args:
        command: the rank's argv (e.g. ``("python", "-m", "lab.bench.synthetic", ...)``).
        np: number of ranks (for ``ps``: the number of workers).
        cluster: where ranks may go.
        experiment: the run directory's group under results/runs/.
        env: extra environment for every rank.
        timeout: seconds until the whole run is ended; None for no limit.
        options: launcher-specific settings (e.g. ``{"controller": "gloo"}``).
        params: the experiment's parameters, recorded in the manifest.
    """

    command: tuple[str, ...]
    np: int = 1
    cluster: Cluster | None = None
    experiment: str = "adhoc"
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProcessSpec:
    """One process for the supervisor to start.

    Args:
        argv: the command; never a shell string.
        env: variables to set on top of the inherited environment (local) or to pass
            explicitly (remote).
        ranks: the ranks whose output this process carries: one for per-rank processes,
            all of them for a launcher process such as ``mpirun``.
        host: where to start it; a local host means a local process, others go over SSH.
        role: what the process is ("rank", "launcher", "ps", "chief", "worker").
        cwd: working directory (None: the repository root locally, the host's workdir
            remotely).
    """

    argv: tuple[str, ...]
    env: Mapping[str, str]
    ranks: tuple[int, ...]
    host: Host
    role: str = "rank"
    cwd: str | None = None


@dataclass(frozen=True)
class Line:
    """One line of output, attributed to a rank (None when it cannot be told)."""

    rank: int | None
    stream: str  # "stdout" or "stderr"
    text: str


class Launcher(Protocol):
    """What every launcher provides (see STYLE.md, 'What that means for lab/')."""

    name: ClassVar[str]

    def check(self, job: Job) -> None:
        """Raise LaunchError (with what to install) if the launcher cannot run ``job``."""

    def build(self, job: Job, slots: Sequence[Slot]) -> list[ProcessSpec]:
        """The processes that start ``job`` on ``slots``; pure, no side effects."""

    def demux(self, spec: ProcessSpec, stream: str, text: str) -> Line:
        """Attribute one line printed by ``spec`` to its rank (and strip any tag)."""


class PerRankLauncher:
    """Shared behaviour of launchers that start one process per rank."""

    name: ClassVar[str] = ""

    def check(self, job: Job) -> None:
        return None

    def demux(self, spec: ProcessSpec, stream: str, text: str) -> Line:
        return Line(spec.ranks[0] if len(spec.ranks) == 1 else None, stream, text)


def find_program(name: str) -> str | None:
    """``name`` on PATH, else beside this interpreter (a venv's bin/ is often not on PATH
    when Jupyter or pytest is started by its full path)."""
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else None


LAUNCHERS: dict[str, Callable[[], Launcher]] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator: make a launcher available under ``name``."""

    def deco(cls: type) -> type:
        cls.name = name
        LAUNCHERS[name] = cls
        return cls

    return deco


def get_launcher(name: str) -> Launcher:
    """The launcher registered as ``name``; unknown names list the known ones."""
    from lab.cluster import launchers as _  # noqa: F401  (registers the built-ins)

    try:
        return LAUNCHERS[name]()
    except KeyError:
        from lab.errors import ParameterError

        raise ParameterError("launcher", name, ", ".join(sorted(LAUNCHERS))) from None


class RunControl(Protocol):
    """What an observer may do to a run in progress (the view's Stop button)."""

    def cancel(self, reason: str = "cancelled") -> None:
        """Ask the run to end; thread-safe, returns at once."""


class RunObserver(Protocol):
    """Something that watches a run: the live view, the headless progress line, a tee.

    ``on_line`` is called from the per-stream reader threads: it must be cheap and
    thread-safe, and must never block (set widget values; never ``with out:``).
    """

    def on_start(self, run_dir: str, ranks: Sequence[int], control: RunControl) -> None: ...

    def on_line(self, line: Line) -> None: ...

    def on_end(
        self, state: str, exit_code: int, rank_exit_codes: Mapping[int, int | None]
    ) -> None: ...
