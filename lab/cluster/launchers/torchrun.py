"""torchrun: one elastic agent per host, each starting that host's ranks.

Run as ``python -m torch.distributed.run`` with the host's interpreter, so no ``torchrun``
script needs to be on PATH, and with ``--no-python --`` so the job's command runs exactly as
given: without the ``--`` torchrun's argparse reads the command's own flags too, and one
that abbreviates two of its options (``--monitor``: ``--monitor-interval`` and
``--monitor_interval``) ends the job before any rank starts. One host on this machine uses
``--standalone``; several use the static rendezvous at the first host (``--nnodes H
--node-rank i --master-addr --master-port``). Global ranks are assigned by torchrun as node
base + local rank, which is the lab's slot order.

torchrun prefixes its workers' lines only when asked: ``--tee 3`` makes it print
``[default0]:text`` (role name + local rank, no space) on the stream the worker used, and
writes nothing to disk without ``--log-dir``; ``demux`` maps the local rank back to the rank.
When a worker fails, torchrun's ChildFailedError table names it (``blame``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from collections.abc import Sequence

from lab.cluster.blame import RankEnd, torchrun_ends
from lab.cluster.inventory import Host, Slot
from lab.cluster.launchers.base import (
    Job,
    Line,
    ProcessSpec,
    base_env,
    check_job,
    hosts_in_order,
    register,
    rendezvous_port,
)
from lab.errors import LaunchError

DEFAULT_ROLE = "default"
INSTALL_TORCH = (
    "torch is not installed; install it on every node: pip install torch "
    "(CPU-only: --index-url https://download.pytorch.org/whl/cpu)"
)


def host_python(host: Host, emulated: bool = False) -> str:
    """The interpreter that runs torchrun on ``host``: its configured one, else this one
    on this machine and its emulated hosts (which share its files), and ``python3`` on
    remote ones."""
    if host.python:
        return host.python
    return sys.executable if host.is_local or emulated else "python3"


def parse_torchrun_tag(text: str, role: str = DEFAULT_ROLE) -> tuple[int, str] | None:
    """(local rank, text) from a line ``torchrun --tee 3`` prefixed, or None."""
    m = re.match(rf"^\[{re.escape(role)}(\d+)\]:(.*)$", text, re.DOTALL)
    return None if m is None else (int(m.group(1)), m.group(2))


@register("torchrun")
class TorchrunLauncher:
    """torchrun, one agent per host.

    Options:
        master_port: the rendezvous port on the first host (default: a free one per job;
            unused with ``--standalone``, which picks its own).
    """

    name = "torchrun"
    reporter = "torchrun"  # whose words name a failed rank (blame)
    # its rendezvous store listens on every interface: a one-machine job runs on lo alone
    wide_listeners = True  # (lab.cluster.loopback_hook)

    def check(self, job: Job) -> None:
        if importlib.util.find_spec("torch") is None:
            raise LaunchError(INSTALL_TORCH)

    def build(self, job: Job, slots: Sequence[Slot]) -> list[ProcessSpec]:
        check_job(job, slots)
        hosts = hosts_in_order(slots)
        standalone = len(hosts) == 1 and hosts[0][0].is_local
        port = 0 if standalone else rendezvous_port(job, "master_port", [hosts[0][0]])
        master_addr = hosts[0][0].reach_address
        env = base_env(job)
        emulated = job.cluster is not None and job.cluster.emulated
        specs = []
        for node_rank, (host, group) in enumerate(hosts):
            argv = [host_python(host, emulated), "-m", "torch.distributed.run"]
            if standalone:
                argv += ["--standalone", "--nnodes", "1", "--nproc-per-node", str(len(group))]
            else:
                argv += ["--nnodes", str(len(hosts)), "--nproc-per-node", str(len(group))]
                argv += ["--node-rank", str(node_rank)]
                argv += ["--master-addr", master_addr, "--master-port", str(port)]
            argv += ["--tee", "3", "--no-python", "--", *job.command]
            specs.append(
                ProcessSpec(
                    argv=tuple(argv),
                    env=env,
                    ranks=tuple(s.rank for s in group),
                    host=host,
                    role="launcher",
                )
            )
        return specs

    def demux(self, spec: ProcessSpec, stream: str, text: str) -> Line:
        tagged = parse_torchrun_tag(text)
        if tagged is not None and tagged[0] < len(spec.ranks):
            return Line(spec.ranks[tagged[0]], stream, tagged[1])
        return Line(None, stream, text)

    def blame(self, spec: ProcessSpec, said: Sequence[str]) -> list[RankEnd]:
        """The ranks torchrun's failure table names, its root cause first
        (lab.cluster.blame), local ranks mapped back to the lab's."""
        return [
            dataclasses.replace(e, rank=spec.ranks[e.rank])
            for e in torchrun_ends(said)
            if e.rank < len(spec.ranks)
        ]
