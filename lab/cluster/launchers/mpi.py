"""mpirun: one launcher process that starts every rank (over its own SSH for remote hosts).

Two flag styles: OpenMPI (``-H h1:2 --bind-to none --map-by slot --tag-output -x VAR=v``)
and MPICH's Hydra (``-hosts h1:2 -prepend-rank -genv VAR v``). Secret variables
(lab.cluster.secret_env) go by name only (``-x VAR``, ``-genvlist VAR``): their values are
in mpirun's own environment, never on its command line. Each rank's output comes
back through mpirun tagged with its rank; ``demux`` reads the tag:

- OpenMPI 5 ``--tag-output``: ``[1,0]<stdout>: text`` (job id, rank; one space after the
  colon, which is removed; OpenMPI 4 prints no space).
- MPICH ``-prepend-rank``: ``[0] text``. Hydra 4.0 also appends the tag before the newline
  when a rank writes the text and its newline separately (Python's unbuffered ``print``
  does): ``[1] text[1] ``; that trailing tag is removed too.

Ranks find their numbers in OMPI_COMM_WORLD_* or PMI_* variables; mpirun cannot give each
rank its own variables, so the workload picks its GPU from its local rank.

Remote hosts with their own ssh port or user get them through an ssh_config that launch()
writes into the run directory (``Host`` blocks, then ``Include ~/.ssh/config``), given to
OpenMPI's ssh agent as ``ssh -F <file>``; MPICH's Hydra takes no ssh arguments, so it
refuses such hosts.

A cluster whose ``extra`` names a ``remote_agent`` (a Slurm job's, lab.cluster.slurm.hook)
is reached through that program in ssh's place (``agent HOST COMMAND``, OpenMPI's plm
``ssh`` forced, so OpenMPI's own Slurm support does not take over inside an allocation).

On an emulated cluster (lab.cluster.emulation) mpirun reaches each host by its bridge
address through the sshd that runs inside it (``needs_ssh_to_hosts``), so every rank lands
in its host's network namespace and cgroup. OpenMPI is given the cluster's ssh options
(identity, the emulation's own known_hosts, strict host-key checking) as its ssh agent,
``--prefix`` (the directory holding bin/mpirun, so the remote prted is found), and the
lab's PATH, LD_LIBRARY_PATH and PYTHONPATH (``-x``), since an SSH session starts afresh.
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
import re
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from lab.cluster.blame import RankEnd, openmpi_ends
from lab.cluster.host_keys import INSECURE, strict
from lab.cluster.inventory import Slot
from lab.cluster.launchers.base import (
    INSTALL_MPI,
    Job,
    Line,
    Lines,
    ProcessSpec,
    base_env,
    check_job,
    check_remote_ssh,
    choice_option,
    cluster_ssh_options,
    demux_each,
    find_program,
    launcher_host,
    mpi_host_list,
    register,
)
from lab.cluster.ssh import split_config_option
from lab.errors import LaunchError
from lab.metrics.tags import OPENMPI_LINES, parse_mpich_tag, parse_openmpi_tag

FLAVORS = ("openmpi", "mpich")
FORWARDED = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH")  # what ranks behind sshd need
REMOTE_AGENT = "remote_agent"  # cluster.extra: a program taking ssh's place (HOST COMMAND)


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


@functools.lru_cache(maxsize=8)
def openmpi_major(program: str = "mpirun") -> int | None:
    """OpenMPI's major version from ``program --version`` (None when it cannot be told)."""
    path = find_program(program) or program
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"\(Open MPI\) (\d+)\.", out.stdout + out.stderr)
    return int(m.group(1)) if m else None


def openmpi_ssh_args(program: str, job: Job, slots: Sequence[Slot], env: dict) -> list[str]:
    """OpenMPI flags that reach the hosts: the ssh agent with the cluster's options (and
    ``-F <ssh_config>`` when the job has one: per-host ports and users; host keys checked
    strictly when any host is not this machine), ``--prefix`` (the
    ``prefix`` option for remote hosts; this OpenMPI's own on emulated ones), and on
    emulated hosts the forwarded PATH, LD_LIBRARY_PATH and PYTHONPATH.

    OpenMPI 5 (PRRTE) names the agent ``--prtemca plm_ssh_agent``; it also takes 4's
    ``--mca plm_rsh_agent``, but silently ignores ``--prtemca plm_rsh_agent``.
    """
    args: list[str] = []
    agent = job.cluster.extra.get(REMOTE_AGENT) if job.cluster else None
    if agent:  # a scheduler's way onto its nodes (lab.cluster.slurm.hook): no ssh at all
        major = openmpi_major(program)
        if major and major < 5:
            args = ["--mca", "plm", "rsh", "--mca", "plm_rsh_agent", str(agent)]
        else:
            args = ["--prtemca", "plm", "ssh", "--prtemca", "plm_ssh_agent", str(agent)]
        if job.options.get("prefix"):
            args += ["--prefix", str(job.options["prefix"])]
        return args
    opts = cluster_ssh_options(job)
    if any(not s.host.is_local for s in slots):  # host keys checked (lab.cluster.host_keys)
        insecure = bool(job.cluster and job.cluster.extra.get(INSECURE) is True)
        opts = strict(opts, insecure=insecure)
    config = job.options.get("ssh_config")
    if config:
        opts, _ = split_config_option(opts)  # the generated config includes that file
        opts = ["-F", str(config), *opts]
    if opts:
        major = openmpi_major(program)
        flag = ["--mca", "plm_rsh_agent"] if major and major < 5 else ["--prtemca", "plm_ssh_agent"]
        args += [*flag, f"ssh {shlex.join(opts)}"]
    if job.options.get("prefix"):
        args += ["--prefix", str(job.options["prefix"])]
    elif any(s.host.namespace is not None for s in slots):
        args += ["--prefix", str(Path(program).parent.parent)]
    if any(s.host.namespace is not None for s in slots):
        for name in FORWARDED:
            if name in os.environ and name not in env:
                args += ["-x", name]  # a bare name: mpirun passes its own value on
    return args


@register("mpi")
class MpiLauncher:
    """mpirun with all ranks under one launcher process.

    Options:
        flavor: "openmpi" or "mpich"; detected from ``mpirun --version`` when not given.
        ssh_config: an ssh_config file for OpenMPI's ssh (``ssh -F FILE``); lab.cluster.launch
            writes one into the run directory when remote hosts set ssh_port/ssh_user.
        prefix: where OpenMPI is installed on the remote hosts (``--prefix``, so an ssh
            session finds ``prted`` there), e.g. the nodes' venv for ``pip install openmpi``.

    Args:
        program: the mpirun to use (found on PATH or beside this Python when a bare name).
        as_root: add OpenMPI's ``--allow-run-as-root``; default: whether we run as root.
    """

    name = "mpi"
    # prterun's out-of-band listeners bind every interface: a one-machine job runs on lo
    wide_listeners = True  # alone (lab.cluster.loopback_hook)
    reporter: ClassVar[str] = "mpirun"  # whose words name a failed rank (blame)
    needs_ssh_to_hosts: ClassVar[bool] = True  # emulated clusters get an sshd per host

    def __init__(self, program: str = "mpirun", as_root: bool | None = None) -> None:
        self.program = program
        self.as_root = as_root

    def check(self, job: Job) -> None:
        if find_program(self.program) is None:
            raise LaunchError(f"{self.program} not found on PATH; {INSTALL_MPI}")
        flavor = choice_option(job, "flavor", None, FLAVORS) or detect_mpi_flavor(self.program)
        if flavor == "mpich":
            check_remote_ssh(job, "MPICH's mpirun", "takes no ssh arguments (-launcher-exec)")
        if flavor == "mpich" and job.cluster is not None and job.cluster.emulated:
            raise LaunchError(
                "emulated clusters run mpirun with OpenMPI's ssh agent and --prefix; MPICH "
                "is not supported there: use OpenMPI (pip install openmpi) or launcher='local'"
            )

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
            argv += openmpi_ssh_args(program, job, slots, env)
            for key, value in env.items():  # a secret by name: its value is in our env
                argv += ["-x", key if key in job.secret_env else f"{key}={value}"]
        else:
            argv += ["-np", str(job.np), "-hosts", mpi_host_list(slots), "-prepend-rank"]
            for key, value in env.items():
                if key not in job.secret_env:
                    argv += ["-genv", key, value]
            secret = [k for k in env if k in job.secret_env]
            if secret:
                argv += ["-genvlist", ",".join(secret)]
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

    def blame(self, spec: ProcessSpec, said: Sequence[str]) -> list[RankEnd]:
        """The ranks OpenMPI's mpirun says failed, the first first (lab.cluster.blame);
        MPICH's words are not read yet."""
        return openmpi_ends(said)

    def demux_block(self, spec: ProcessSpec, stream: str, text: str) -> list[Lines]:
        """``demux`` for a block of lines at once: OpenMPI's tags are read by one regex
        over the block and runs of one rank's lines joined in C, so no Python code runs
        per line; MPICH's are read line by line."""
        if "-prepend-rank" in spec.argv[:6]:
            return demux_each(lambda raw: self.demux(spec, stream, raw), text)
        out: list[Lines] = []
        runs = itertools.groupby(OPENMPI_LINES.findall(text), operator.itemgetter(1, 2))
        for (rank, tag), run in runs:
            if not rank:
                body = "\n".join(map(operator.itemgetter(3), run))
                out.append(Lines(None, stream, body + "\n"))
            elif int(rank) in spec.ranks:
                body = "\n".join(map(operator.itemgetter(3), run))
                out.append(Lines(int(rank), "stdout" if tag == "stdout" else "stderr", body + "\n"))
            else:  # a tag naming no rank of ours: kept whole, as demux does
                body = "\n".join(t[0] + t[3] for t in run)
                out.append(Lines(None, stream, body + "\n"))
        return out
