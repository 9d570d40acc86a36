"""horovodrun: one launcher process that starts every rank, with the Gloo or MPI controller.

Gloo (the default) needs no MPI: horovodrun starts each rank itself (over SSH for remote
hosts) and prefixes each line with ``[<rank>]<stdout>:`` or ``[<rank>]<stderr>:`` (no space
after the colon). With the MPI controller horovodrun runs ``mpirun --tag-output``, whose
lines read ``[1,<rank>]<stdout>: text``; ``demux`` reads both.

``--disable-cache`` keeps horovodrun from writing its check cache under ~/.horovod. Its
per-launch check that Horovod was built with the controller is asked once per build
instead (``runner``).

Remote hosts that share one ssh_port get it as ``--ssh-port``; an ssh_user, or ports that
differ between hosts, are refused (horovodrun has no way to say them): such clusters run
Horovod under the ``mpi`` launcher, which gives OpenMPI an ssh_config.

Emulated clusters are refused: before it starts ranks, horovodrun (0.28.1, with either
controller) runs ``ssh -o PasswordAuthentication=no -o StrictHostKeyChecking=no HOST true``
to every remote host (horovod/runner/util/remote.py, launch.py), with only ``--ssh-port``
and ``--ssh-identity-file`` to adjust it: no known_hosts, no ssh config. That would turn
host-key checking off (and write to ~/.ssh/known_hosts). Horovod's MPI controller is
reached instead through the ``mpi`` launcher, whose ranks run the Horovod workload under
mpirun with the emulation's own known_hosts and strict checking.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import ClassVar

from lab.cluster.inventory import Slot
from lab.cluster.launchers.base import (
    INSTALL_MPI,
    Job,
    Line,
    ProcessSpec,
    base_env,
    check_job,
    check_remote_ssh,
    choice_option,
    find_program,
    launcher_host,
    mpi_host_list,
    register,
    remote_hosts,
)
from lab.errors import LaunchError
from lab.metrics.tags import parse_gloo_tag, parse_openmpi_tag

CONTROLLERS = ("gloo", "mpi")
INSTALL_HOROVOD = (
    "install Horovod on every node: HOROVOD_WITH_GLOO=1 HOROVOD_WITH_TENSORFLOW=1 "
    "pip install --no-cache-dir horovod==0.28.1 (needs cmake and a C++ compiler; "
    "see env/setup.sh)"
)

EMULATED_ALTERNATIVE = (
    "horovodrun cannot run on emulated clusters: it reaches hosts with "
    "'ssh -o StrictHostKeyChecking=no' hard-coded (horovod/runner/util/remote.py), which would "
    "turn host-key checking off. Use launcher='mpi' with the Horovod workload instead (Horovod's "
    "MPI controller under mpirun, e.g. 'python -m lab.bench.synthetic --backend horovod'; "
    "the system 'horovod-mpi' in lab.experiments)"
)


NO_SSH_USER = (
    "builds 'ssh -o ... HOST -p PORT' itself (horovod/runner/util/remote.py) with one "
    "--ssh-port for every host and no user or ssh_config"
)


def ssh_port(job: Job) -> int | None:
    """The one ``--ssh-port`` horovodrun can take: the remote hosts' common ssh_port.

    Raises LaunchError when a host sets ssh_user, or the remote hosts' ports differ.
    """
    remote = remote_hosts(job)
    ports = {h.ssh_port for h in remote}
    if any(h.ssh_user for h in remote) or len(ports) > 1:
        check_remote_ssh(job, "horovodrun", NO_SSH_USER)
    port = next(iter(ports), None)
    return int(port) if port else None


@register("horovod")
class HorovodLauncher:
    """horovodrun -np N -H ... --gloo | --mpi.

    Options:
        controller: "gloo" (default) or "mpi".
        nic: network interface(s) for Horovod's traffic, e.g. "eth0" (``--network-interfaces``).

    Args:
        program: the horovodrun to use.
        as_root: with the MPI controller, pass ``--allow-run-as-root`` to mpirun; default:
            whether we run as root.
    """

    name = "horovod"
    needs_ssh_to_hosts: ClassVar[bool] = True

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
        if job.cluster is not None and job.cluster.emulated:
            raise LaunchError(EMULATED_ALTERNATIVE)
        if find_program(self.program) is None:
            raise LaunchError(f"{self.program} not found on PATH; {INSTALL_HOROVOD}")
        controller = choice_option(job, "controller", "gloo", CONTROLLERS)
        if controller == "mpi" and find_program("mpirun") is None:
            raise LaunchError(f"controller='mpi' needs mpirun, which is not on PATH; {INSTALL_MPI}")
        ssh_port(job)

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
        port = ssh_port(job)
        if port is not None:
            argv += ["--ssh-port", str(port)]
        nic = job.options.get("nic")
        if nic:
            argv += ["--network-interfaces", str(nic)]
        argv += job.command
        return [
            ProcessSpec(
                argv=tuple(argv),
                env=base_env(job),
                ranks=tuple(range(job.np)),
                host=launcher_host(),
                role="launcher",
            )
        ]

    def demux(self, spec: ProcessSpec, stream: str, text: str) -> Line:
        tagged = parse_gloo_tag(text) or parse_openmpi_tag(text)
        if tagged is not None and tagged[0] in spec.ranks:
            return Line(tagged[0], tagged[1], tagged[2])
        return Line(None, stream, text)
