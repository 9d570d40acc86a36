"""TensorFlow parameter-server jobs: P servers, W workers and one chief, each its own process.

The launcher only places processes and tells each its part through ``TF_CONFIG``
(``{"cluster": {"chief": [...], "worker": [...], "ps": [...]}, "task": {"type", "index"}}``);
the workload decides what a role does (servers and workers run ``tf.distribute.Server`` and
join, the chief runs the ClusterCoordinator).

Rank numbers, so every process has its own log: workers 0..W-1 (``job.np`` = W, placed on
the slots), then servers W..W+P-1, then the chief W+P. Servers and the chief need no slot
and get ``CUDA_VISIBLE_DEVICES=""``, so they may run on CPU-only hosts; workers get their
slot's GPU.

Ports: each process listens on ``base_port`` plus a counter kept per address, counting in
rank order, so two processes on one machine never share a port. ``base_port`` is a free
block per job (lab.cluster.ports) unless given, so two jobs on one machine never collide.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any

from lab.cluster.inventory import Host, Slot
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
    visible_devices,
)
from lab.cluster.ports import port_block
from lab.errors import ParameterError


def _num_ps(job: Job) -> int:
    value: Any = job.options.get("num_ps", 1)
    try:
        n = int(value) if isinstance(value, int | str) and not isinstance(value, bool) else 0
    except ValueError:
        n = 0
    if n < 1:
        raise ParameterError("num_ps", value, "an integer >= 1")
    return n


def _named_hosts(job: Job, slots: Sequence[Slot], option: str, default: list[Host]) -> list[Host]:
    """Hosts named in ``job.options[option]`` ("h1,h2" or a list), looked up in the cluster."""
    value = job.options.get(option)
    if value is None:
        return default
    names = [n.strip() for n in value.split(",")] if isinstance(value, str) else list(value)
    known = {h.name: h for h in (job.cluster.hosts if job.cluster else ())}
    known.update({s.host.name: s.host for s in slots})
    missing = [n for n in names if n not in known]
    if not names or missing:
        raise ParameterError(option, value, "names of the cluster's hosts: " + ", ".join(known))
    return [known[n] for n in names]


@register("ps")
class ParameterServerLauncher(PerRankLauncher):
    """TF parameter-server jobs; ``job.np`` is the number of workers.

    Options:
        num_ps: parameter servers (default 1).
        ps_hosts: hosts for the servers, in turn ("h3" or "h1,h2" or a list; default: the
            workers' hosts in turn). They may be CPU-only hosts of the cluster with no slots.
        chief_host: host of the chief (default: worker 0's host).
        base_port: first port (default: a free block per job).
    """

    name = "ps"
    # its servers listen on every interface: a one-machine job runs on lo alone
    wide_listeners = True  # (lab.cluster.loopback_hook)

    def build(self, job: Job, slots: Sequence[Slot]) -> list[ProcessSpec]:
        check_job(job, slots)
        workers = sorted(slots, key=lambda s: s.rank)
        n_workers, n_ps = len(workers), _num_ps(job)
        used = [h for h, _ in hosts_in_order(workers)]
        ps_pool = _named_hosts(job, workers, "ps_hosts", used)
        ps_hosts = [ps_pool[i % len(ps_pool)] for i in range(n_ps)]
        chief_host = _named_hosts(job, workers, "chief_host", [workers[0].host])[0]

        # (role, index, host, extra env) in rank order: workers, servers, chief.
        plan: list[tuple[str, int, Host, dict[str, str]]] = [
            ("worker", i, s.host, visible_devices(s)) for i, s in enumerate(workers)
        ]
        plan += [("ps", i, h, no_devices()) for i, h in enumerate(ps_hosts)]
        plan.append(("chief", 0, chief_host, no_devices()))

        per_address: dict[str, int] = {}
        for _, _, host, _ in plan:
            per_address[host.reach_address] = per_address.get(host.reach_address, 0) + 1
        if job.options.get("base_port") is None:
            hosts = list({h: None for _, _, h, _ in plan})
            base_port = port_block(hosts, max(per_address.values()))
        else:
            base_port = port_option(job, "base_port", 0)
        next_port: dict[str, int] = {}
        addresses: list[str] = []
        for _, _, host, _ in plan:
            address = host.reach_address
            port = base_port + next_port.get(address, 0)
            next_port[address] = next_port.get(address, 0) + 1
            if port > 65535:
                allowed = "a port that leaves room for every process"
                raise ParameterError("base_port", base_port, allowed)
            addresses.append(f"{address}:{port}")

        cluster = {
            "chief": addresses[n_workers + n_ps :],
            "worker": addresses[:n_workers],
            "ps": addresses[n_workers : n_workers + n_ps],
        }
        common = base_env(job)
        token = secrets.token_hex(8)  # names this job's chief-ended mark (lab.bench.backends.ps)
        specs = []
        for rank, (role, index, host, gpu_env) in enumerate(plan):
            tf_config = {"cluster": cluster, "task": {"type": role, "index": index}}
            env = {
                **common,
                "TF_CONFIG": json.dumps(tf_config),
                "LAB_PS_ROLE": role,
                "LAB_PS_INDEX": str(index),
                "LAB_PS_NUM_WORKERS": str(n_workers),
                "LAB_PS_NUM_PS": str(n_ps),
                "LAB_PS_JOB": token,
                "RANK": str(rank),
                "WORLD_SIZE": str(len(plan)),
                **gpu_env,
            }
            specs.append(
                ProcessSpec(argv=tuple(job.command), env=env, ranks=(rank,), host=host, role=role)
            )
        return specs
