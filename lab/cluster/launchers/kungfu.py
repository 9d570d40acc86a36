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
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Sequence

from lab.cluster.inventory import Host, Slot
from lab.cluster.launchers.base import (
    Job,
    Line,
    ProcessSpec,
    base_env,
    check_job,
    find_program,
    hosts_in_order,
    register,
)
from lab.errors import HostSpecError, LaunchError, ParameterError
from lab.metrics.tags import parse_kungfu_tag

DEFAULT_PORT_BEGIN = 10000
INSTALL_KUNGFU = (
    "kungfu-run not found on PATH; install KungFu on every node: "
    "git clone https://github.com/lsds/KungFu && pip install ./KungFu "
    "(needs Go and a C++ compiler)"
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
    """kungfu-run -np N -H ip:slots,... [-nic IFACE | -self IP] prog args, once per host.

    Options:
        nic: the network interface kungfu-run infers each host's IP from (``-nic``).
        port_range: the peers' ports, "BEGIN-END" (KungFu's default 10000-11000).
    """

    name = "kungfu"

    def __init__(self, program: str = "kungfu-run") -> None:
        self.program = program

    def check(self, job: Job) -> None:
        if find_program(self.program) is None:
            raise LaunchError(INSTALL_KUNGFU)
        _port_begin(job.options.get("port_range"))
        for host in job.cluster.hosts if job.cluster else ():
            kungfu_ipv4(host)

    def build(self, job: Job, slots: Sequence[Slot]) -> list[ProcessSpec]:
        check_job(job, slots)
        host_list = kungfu_host_list(slots)
        port_range = job.options.get("port_range")
        _port_begin(port_range)
        nic = job.options.get("nic")
        env = base_env(job)
        specs = []
        for host, group in hosts_in_order(slots):
            program = self.program
            if host.is_local:
                program = find_program(self.program) or self.program
            argv = [program, "-np", str(job.np), "-H", host_list]
            if nic:
                argv += ["-nic", str(nic)]
            elif kungfu_ipv4(host) != "127.0.0.1":
                argv += ["-self", kungfu_ipv4(host)]
            if port_range is not None:
                argv += ["-port-range", str(port_range)]
            argv += job.command
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
