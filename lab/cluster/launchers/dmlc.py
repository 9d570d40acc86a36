"""dmlc: MXNet's distributed KVStore jobs (ps-lite): one scheduler, the servers, the workers.

As MXNet's ``tools/launch.py`` does, every process runs the same command and learns its
part from the environment: ``DMLC_ROLE`` (``worker``, ``server`` or ``scheduler``),
``DMLC_PS_ROOT_URI``/``DMLC_PS_ROOT_PORT`` (where the scheduler listens: worker 0's host),
``DMLC_NUM_SERVER`` and ``DMLC_NUM_WORKER``; ``DMLC_NODE_HOST`` tells ps-lite the address
to announce (the host's lab address, so on emulated hosts traffic takes the shaped links).
In a server or the scheduler, ``import mxnet`` runs the ps-lite node and exits once the
workers have finalised their KVStore; so a run succeeds when every process exits 0, and
when a worker fails the supervisor ends the servers and the scheduler with the rest.

Placement, as P3's experiments place them: one server per worker host (the first
``num_servers`` hosts of the workers), the scheduler on worker 0's host. Ranks: workers
0..W-1 (``job.np`` = W), servers W..W+S-1, the scheduler W+S, each with its own log.

Interpreter: MXNet 1.9.1 needs numpy < 1.24, so it lives in its own venv, ``.venv-mxnet``
(``make setup``: env/setup_mxnet.sh). A command starting with ``python`` (or the lab's own
interpreter) runs that venv's Python: the repository's on local and emulated hosts and
on a Slurm job's nodes (they share the filesystem the lab runs from, as its ``python``
default says), ``<workdir>/.venv-mxnet/bin/python`` on SSH hosts and on nodes of a slurm
profile that names a ``workdir``; ``options={"python": ...}`` names another (e.g. a
Python with P3's MXNet fork on GPU nodes).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.cluster.inventory import Host, Slot, allocate
from lab.cluster.launchers.base import (
    Job,
    PerRankLauncher,
    ProcessSpec,
    base_env,
    check_job,
    hosts_in_order,
    no_devices,
    port_option,
    register,
    rendezvous_port,
    visible_devices,
)
from lab.errors import LaunchError, ParameterError
from lab.metrics.layout import REPO_ROOT

MXNET_VENV = ".venv-mxnet"
INSTALL_MXNET = (
    f"MXNet is not installed: {MXNET_VENV}/bin/python is missing; make setup creates it "
    "(env/setup_mxnet.sh: mxnet==1.9.1 with numpy<1.24 in its own venv)"
)


def local_python() -> Path:
    """The MXNet venv's interpreter on this machine (also used by emulated hosts)."""
    return REPO_ROOT / MXNET_VENV / "bin" / "python"


def sees_repository(host: Host, job: Job) -> bool:
    """Whether ``host`` has this repository at its path: this machine, an emulated host, or
    a Slurm node with no ``workdir`` of its own."""
    if host.is_local or host.namespace is not None:
        return True
    return job.cluster is not None and job.cluster.slurm is not None and not host.workdir


def python_on(host: Host, job: Job) -> str:
    """The interpreter the ranks on ``host`` run: the ``python`` option, else the MXNet venv
    of the repository (local, emulated, Slurm) or of the host's workdir (SSH)."""
    given = job.options.get("python")
    if given:
        return str(given)
    if sees_repository(host, job):
        return str(local_python())
    return f"{host.workdir}/{MXNET_VENV}/bin/python" if host.workdir else f"{MXNET_VENV}/bin/python"


def _on_this_machine(job: Job) -> bool:
    hosts = job.cluster.hosts if job.cluster else ()
    return not hosts or any(sees_repository(h, job) for h in hosts)


def num_servers(job: Job, worker_hosts: int) -> int:
    """``options["num_servers"]`` (default: one per worker host), at most one per host."""
    value: Any = job.options.get("num_servers", worker_hosts)
    ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= worker_hosts
    if not ok:
        allowed = f"1 to the {worker_hosts} host(s) of the workers (one server per host)"
        raise ParameterError("num_servers", value, allowed)
    return value


@register("dmlc")
class DmlcLauncher(PerRankLauncher):
    """ps-lite jobs for MXNet's ``dist_*`` KVStores; ``job.np`` is the number of workers.

    Options:
        num_servers: servers, one per worker host from the first (default: all of them).
        root_port: the scheduler's port (default: a free one per job).
        python: the ranks' interpreter (default: the MXNet venv, see the module docstring).
    """

    name = "dmlc"
    # its servers listen on every interface: a one-machine job runs on lo alone
    wide_listeners = True  # (lab.cluster.loopback_hook)

    def check(self, job: Job) -> None:
        if job.options.get("root_port") is not None:
            port_option(job, "root_port", 0)
        if job.cluster is not None:
            slots = allocate(job.cluster, job.np)
            num_servers(job, len(hosts_in_order(slots)))
        if job.options.get("python"):
            return
        if _on_this_machine(job) and not local_python().is_file():
            raise LaunchError(INSTALL_MXNET)

    def build(self, job: Job, slots: Sequence[Slot]) -> list[ProcessSpec]:
        check_job(job, slots)
        workers = sorted(slots, key=lambda s: s.rank)
        hosts = [h for h, _ in hosts_in_order(workers)]
        n_servers = num_servers(job, len(hosts))
        root = workers[0].host
        common = {
            **base_env(job),
            "DMLC_PS_ROOT_URI": root.reach_address,
            "DMLC_PS_ROOT_PORT": str(rendezvous_port(job, "root_port", [root])),
            "DMLC_NUM_SERVER": str(n_servers),
            "DMLC_NUM_WORKER": str(len(workers)),
        }
        plan: list[tuple[str, Host, dict[str, str]]] = [
            ("worker", s.host, visible_devices(s)) for s in workers
        ]
        plan += [("server", h, no_devices()) for h in hosts[:n_servers]]
        plan.append(("scheduler", root, no_devices()))
        specs = []
        for rank, (role, host, devices) in enumerate(plan):
            env = {
                **common,
                "DMLC_ROLE": role,
                "DMLC_NODE_HOST": host.reach_address,
                "RANK": str(rank),
                "WORLD_SIZE": str(len(plan)),
                **devices,
            }
            argv = _with_python(job.command, python_on(host, job))
            specs.append(ProcessSpec(argv=argv, env=env, ranks=(rank,), host=host, role=role))
        return specs


def _with_python(command: Sequence[str], python: str) -> tuple[str, ...]:
    """``command`` with a leading ``python``/``python3`` (or the lab's interpreter, which
    launch() puts there) replaced by ``python``; any other program is left as given."""
    if command and command[0] in ("python", "python3", sys.executable):
        return (python, *command[1:])
    return tuple(command)
