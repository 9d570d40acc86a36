"""kungfu-run: KungFu's launcher, one per host, each starting that host's peers.

KungFu's README runs the same ``kungfu-run -np N -H ip1:s,ip2:s -nic eth0 prog ...`` on
every machine; each instance finds itself in ``-H`` (by ``-nic``, or ``-self IP``, or
127.0.0.1) and starts only its own peers. So this launcher builds one process per host
(the supervisor reaches remote ones over SSH), and gives ``-self`` when no NIC is named
and the host is not 127.0.0.1.

Peers are numbered as KungFu numbers them: hosts in ``-H`` order, ports from the start of
``-port-range`` (default 10000) upward on each host; rank = position in that list, which is
the lab's own slot order. kungfu-run prefixes each line of a peer with its name ``ip.port``
in ANSI colour (srcs/go/utils/iostream/xterm.go):

    [\\x1b[1;32m127.0.0.1.10000\\x1b[m::stdout] text
    [\\x1b[1;32m127.0.0.1.10000\\x1b[m::\\x1b[1;35mstderr\\x1b[m] text

and logs without colour (``[127.0.0.1.10000::stdout] text``) look the same once escapes
are dropped; ``demux`` accepts both and escapes anywhere inside the brackets.

kungfu-run also writes every peer's output to ``<ip>.<port>[@version].std{out,err}.log``
in its working directory unless told ``-logdir``: this launcher always gives one, inside
the run directory (``<run>/kungfu/<host>``) when launch() names it, else under the temp
dir, and ``-q`` to keep kungfu-run's own start-up dump (its arguments, environment, NICs)
out of the launcher log.

Emulated hosts (network namespaces on this machine) each get their own kungfu-run inside
their namespace with ``-self`` their address. KungFu's co-located peers (same IP) talk
over a unix socket in /tmp, which every emulated host shares; upstream names it by port
alone, so peers at the same port on two emulated hosts took over each other's socket.
The lab's build names it by address and port (env/kungfu-patches/apply.py), so any
number of slots per emulated host works; peers on different IPs use TCP.

Elastic mode (``elastic=True``, KungFu OSDI'20 Fig 7): ``-w`` makes kungfu-run watch the
cluster configuration; ``-H`` then lists each host's capacity (up to ``max_np`` peers),
``-np`` the starting size, and the first host's kungfu-run also serves that
configuration (``-builtin-config-port``) at the ``-config-server`` URL every peer reads.
A peer resizes with ``kungfu.tensorflow.ops.resize(n)`` (rank 0 proposes, all agree);
kungfu-run starts the added peers and the removed ones exit.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from lab.cluster.inventory import Host, Slot
from lab.cluster.launchers.base import (
    Job,
    Line,
    ProcessSpec,
    base_env,
    check_job,
    find_program,
    hosts_in_order,
    port_option,
    register,
)
from lab.errors import HostSpecError, LaunchError, ParameterError
from lab.metrics.tags import parse_kungfu_tag

DEFAULT_PORT_BEGIN = 10000
DEFAULT_CONFIG_PORT = 9100
MONITORING_ENV = {"KUNGFU_CONFIG_ENABLE_MONITORING": "true"}
RUN_DIR_OPTION = "run_dir"  # set by lab.cluster.launch: where this run's files go
INSTALL_KUNGFU = (
    "kungfu-run not found on PATH; install KungFu on every node: make setup builds it "
    "(env/build_kungfu.sh: KungFu b1e1768 with the lab's patches; needs Go and a C++ compiler)"
)


def kungfu_ipv4(host: Host) -> str:
    """The IPv4 address kungfu-run's ``-H`` needs for ``host`` (it takes no names)."""
    address = host.reach_address
    try:
        ipaddress.IPv4Address(address)
    except ValueError:
        raise HostSpecError(
            f"kungfu-run needs IPv4 addresses in -H, and host {host.name!r} has "
            f"{address!r}; give it an 'address:' (its IPv4) in the cluster profile"
        ) from None
    return address


def kungfu_host_list(slots: Sequence[Slot]) -> str:
    """``ip:n,ip:n`` with the peers actually placed per host."""
    return ",".join(f"{kungfu_ipv4(h)}:{len(group)}" for h, group in hosts_in_order(slots))


def elastic_hosts(job: Job, slots: Sequence[Slot]) -> list[tuple[Host, int]]:
    """Elastic mode's ``-H``: every host of the cluster in order with its capacity, up to
    ``max_np`` peers in all (a host the starting peers do not use still gets a kungfu-run,
    which starts peers there when the job grows)."""
    hosts = list(job.cluster.hosts) if job.cluster else [h for h, _ in hosts_in_order(slots)]
    max_np = _max_np(job, sum(h.slots for h in hosts))
    out, left = [], max_np
    for host in hosts:
        if left <= 0:
            break
        n = min(host.slots, left)
        out.append((host, n))
        left -= n
    return out


def _max_np(job: Job, capacity: int) -> int:
    value = job.options.get("max_np", job.np)
    if not (isinstance(value, int) and not isinstance(value, bool) and job.np <= value):
        raise ParameterError("max_np", value, f"an integer >= np={job.np}")
    if value > capacity:
        raise ParameterError("max_np", value, f"at most the cluster's {capacity} slots")
    return value


def _bool_option(job: Job, name: str, default: bool) -> bool:
    value = job.options.get(name, default)
    if not isinstance(value, bool):
        raise ParameterError(name, value, "True or False")
    return value


def log_dir(job: Job, host: Host) -> str:
    """kungfu-run's ``-logdir`` on ``host``: ``<run>/kungfu/<host>`` where the run directory
    is on this machine's filesystem (local and emulated hosts), else a temp directory."""
    run_dir = job.options.get(RUN_DIR_OPTION)
    if run_dir and (host.is_local or host.namespace is not None):
        return str(Path(str(run_dir)) / "kungfu" / host.name)
    run = Path(str(run_dir)).name if run_dir else job.experiment.replace("/", "-")
    return str(Path(tempfile.gettempdir()) / "distlab-kungfu" / run / host.name)


@functools.lru_cache(maxsize=32)
def peer_ranks(host_list: str, port_begin: int = DEFAULT_PORT_BEGIN) -> dict[tuple[str, int], int]:
    """KungFu's peer numbering for ``-H host_list``: (ip, port) -> rank."""
    ranks: dict[tuple[str, int], int] = {}
    for item in host_list.split(","):
        ip, slots = item.split(":")[:2]
        for j in range(int(slots)):
            ranks[(ip, port_begin + j)] = len(ranks)
    return ranks


def _port_begin(port_range: str | None) -> int:
    if port_range is None:
        return DEFAULT_PORT_BEGIN
    m = re.fullmatch(r"(\d+)-(\d+)", str(port_range))
    if m is None or int(m.group(1)) > int(m.group(2)) or int(m.group(2)) > 65535:
        raise ParameterError("port_range", port_range, "'BEGIN-END', e.g. '10000-11000'")
    return int(m.group(1))


def _flag(argv: Sequence[str], flag: str) -> str | None:
    try:
        return argv[argv.index(flag) + 1]
    except (ValueError, IndexError):
        return None


@register("kungfu")
class KungFuLauncher:
    """kungfu-run -np N -H ip:slots,... [-nic IFACE | -self IP] -q -logdir DIR prog args,
    once per host.

    Options:
        nic: the network interface kungfu-run infers each host's IP from (``-nic``).
        port_range: the peers' ports, "BEGIN-END" (KungFu's default 10000-11000).
        quiet: ``-q`` (default True).
        monitoring: set ``KUNGFU_CONFIG_ENABLE_MONITORING=true`` so that
            ``kungfu.tensorflow.ops.egress_rates`` measures (default False).
        elastic: watch mode (``-w``) with KungFu's config server (default False).
        max_np: elastic mode's largest size (default np); ``-H`` lists that many slots.
        config_port: the config server's port on the first host (default 9100).
    """

    name = "kungfu"
    wants_run_dir = True  # launch() adds options["run_dir"] for -logdir

    def __init__(self, program: str = "kungfu-run") -> None:
        self.program = program

    def check(self, job: Job) -> None:
        if find_program(self.program) is None:
            raise LaunchError(INSTALL_KUNGFU)
        _port_begin(job.options.get("port_range"))
        for name, default in (("quiet", True), ("monitoring", False), ("elastic", False)):
            _bool_option(job, name, default)
        port_option(job, "config_port", DEFAULT_CONFIG_PORT)
        # emulated hosts get their IPv4 addresses when the cluster is brought up
        if job.cluster is not None and not job.cluster.emulated:
            for host in job.cluster.hosts:
                kungfu_ipv4(host)

    def build(self, job: Job, slots: Sequence[Slot]) -> list[ProcessSpec]:
        check_job(job, slots)
        elastic = _bool_option(job, "elastic", False)
        if elastic:
            capacity = elastic_hosts(job, slots)
        else:
            capacity = [(h, len(group)) for h, group in hosts_in_order(slots)]
        host_list = ",".join(f"{kungfu_ipv4(h)}:{n}" for h, n in capacity)
        port_range = job.options.get("port_range")
        _port_begin(port_range)
        nic = job.options.get("nic")
        env = base_env(job)
        if _bool_option(job, "monitoring", False):
            env = {**MONITORING_ENV, **env}
        config_port = port_option(job, "config_port", DEFAULT_CONFIG_PORT)
        config_url = f"http://{kungfu_ipv4(capacity[0][0])}:{config_port}/config"
        specs, first_rank = [], 0
        for i, (host, n) in enumerate(capacity):
            program = self.program
            if host.is_local or host.namespace is not None:  # this machine's own kungfu-run
                program = find_program(self.program) or self.program
            argv = [program, "-np", str(job.np), "-H", host_list]
            if nic:
                argv += ["-nic", str(nic)]
            elif kungfu_ipv4(host) != "127.0.0.1":
                argv += ["-self", kungfu_ipv4(host)]
            if port_range is not None:
                argv += ["-port-range", str(port_range)]
            if _bool_option(job, "quiet", True):
                argv += ["-q"]
            argv += ["-logdir", log_dir(job, host)]
            if elastic:
                argv += ["-w", "-config-server", config_url]
                if i == 0:
                    argv += ["-builtin-config-port", str(config_port)]
            argv += job.command
            specs.append(
                ProcessSpec(
                    argv=tuple(argv),
                    env=env,
                    ranks=tuple(range(first_rank, first_rank + n)),
                    host=host,
                    role="launcher",
                )
            )
            first_rank += n
        return specs

    def demux(self, spec: ProcessSpec, stream: str, text: str) -> Line:
        tagged = parse_kungfu_tag(text)
        host_list = _flag(spec.argv, "-H")
        if tagged is None or host_list is None:
            return Line(None, stream, text)
        ip, port, tag_stream, body = tagged
        ranks = peer_ranks(host_list, _port_begin(_flag(spec.argv, "-port-range")))
        rank = ranks.get((ip, port))
        if rank is None or rank not in spec.ranks:
            return Line(None, stream, text)
        return Line(rank, tag_stream, body)
