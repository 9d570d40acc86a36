"""kungfu-run: KungFu's launcher, one per host, each starting that host's peers.

KungFu's README runs the same ``kungfu-run -np N -H ip1:s,ip2:s -nic eth0 prog ...`` on
every machine; each instance finds itself in ``-H`` (by ``-nic``, or ``-self IP``, or
127.0.0.1) and starts only its own peers. So this launcher builds one process per host
(the supervisor reaches remote ones over SSH), and gives ``-self`` when no NIC is named
and the host is not 127.0.0.1.

Peers are numbered as KungFu numbers them: hosts in ``-H`` order, ports from the start of
``-port-range`` upward on each host; rank = position in that list, which is the lab's own
slot order. Each job gets its own ``-port-range``, ``-port`` (the runner) and config port,
a free block from lab.cluster.ports, unless options name them.

Listeners: upstream KungFu b1e1768 binds ``0.0.0.0:port`` for its peers whatever
``-self``/``-nic`` say (srcs/go/plan/id.go ``ListenAddr(false)``), as do the runner in watch
mode, the builtin config server (unauthenticated ``/config`` and ``/stop``) and, with
monitoring, each peer's metrics server (port + 10000). The lab's build binds each to the
address it was given (env/kungfu-patches/apply.py): a peer and its metrics server to its
self spec's IP, a runner to its ``-self``/``-nic`` address (127.0.0.1 when neither), the
config server to the host of ``-config-server``; so a local job listens on loopback only,
and a host's ``-H`` address must be one of its own. Ports are the job's own free block.
One fixed port remains: in elastic mode a peer that a resize adds on a host that had none
takes 10000 upward (KungFu's ``growOne``), so two elastic jobs growing onto one empty host
at once can still collide there.

kungfu-run prefixes each line of a peer with its name ``ip.port``
in ANSI colour (srcs/go/utils/iostream/xterm.go):

    [\\x1b[1;32m127.0.0.1.10000\\x1b[m::stdout] text
    [\\x1b[1;32m127.0.0.1.10000\\x1b[m::\\x1b[1;35mstderr\\x1b[m] text

and logs without colour (``[127.0.0.1.10000::stdout] text``) look the same once escapes
are dropped; ``demux`` accepts both and escapes anywhere inside the brackets.

kungfu-run also writes every peer's output to ``<ip>.<port>[@version].std{out,err}.log``
in its working directory unless told ``-logdir``: this launcher always gives one, inside
the run directory (``<run>/kungfu/<host>``) when launch() names it (on remote hosts
``distlab-runs/<run>/kungfu/<host>`` under the rank's working directory), else under the
temp dir, and ``-q`` to keep kungfu-run's own start-up dump (its arguments, environment, NICs)
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

from lab.cluster.blame import RankEnd, kungfu_ends
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
from lab.cluster.ports import port_block
from lab.errors import HostSpecError, LaunchError, ParameterError
from lab.metrics.tags import parse_kungfu_tag

DEFAULT_PORT_BEGIN = 10000  # kungfu-run's own default; the lab always gives -port-range
MONITORING_PORT_OFFSET = 10000  # a peer's monitoring server listens on its port + 10000
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
    is on this machine's filesystem (local and emulated hosts, and a Slurm job's nodes,
    which share the lab's filesystem as a Slurm cluster's nodes do); on a remote host
    ``distlab-runs/<run>/kungfu/<host>`` relative to where its ranks start (its workdir, else
    the login's home), not a name in a shared /tmp that another user could take first."""
    run_dir = job.options.get(RUN_DIR_OPTION)
    shared = host.is_local or host.namespace is not None
    if run_dir and (shared or (job.cluster is not None and job.cluster.slurm is not None)):
        return str(Path(str(run_dir)) / "kungfu" / host.name)
    run = Path(str(run_dir)).name if run_dir else job.experiment.replace("/", "-")
    if not (host.is_local or host.namespace is not None):
        return str(Path("distlab-runs") / run / "kungfu" / host.name)
    return str(Path(tempfile.gettempdir()) / "distlab-kungfu" / run / host.name)


@functools.lru_cache(maxsize=32)
def peer_ranks(
    host_list: str, port_begin: int = DEFAULT_PORT_BEGIN, elastic: bool = False
) -> dict[tuple[str, int], int]:
    """KungFu's peer numbering for ``-H host_list``: (ip, port) -> rank.

    ``elastic``: a peer that a resize adds on a host with no peer yet takes KungFu's own
    first port, 10000 upward, whatever ``-port-range`` said (srcs/go/plan/cluster.go
    ``growOne``); such ports name the same ranks as the job's own on that host.
    """
    ranks: dict[tuple[str, int], int] = {}
    for item in host_list.split(","):
        ip, slots = item.split(":")[:2]
        for j in range(int(slots)):
            ranks[(ip, port_begin + j)] = len(ranks)
    if elastic:
        for (ip, port), rank in list(ranks.items()):
            ranks.setdefault((ip, DEFAULT_PORT_BEGIN + port - port_begin), rank)
    return ranks


def _port_begin(port_range: str | None) -> int:
    if port_range is None:
        return DEFAULT_PORT_BEGIN
    m = re.fullmatch(r"(\d+)-(\d+)", str(port_range))
    if m is None or not 0 < int(m.group(1)) <= int(m.group(2)) <= 65535:
        raise ParameterError("port_range", port_range, "'BEGIN-END', e.g. '10000-11000'")
    return int(m.group(1))


def job_ports(job: Job, hosts: Sequence[Host], peers_per_host: int) -> tuple[str, int, int]:
    """(``-port-range``, ``-port``, config server port) for one job: the options the user
    gave, and a free block (lab.cluster.ports) for the rest.

    The block holds the runner's port, then (elastic) the config server's, then one port
    per peer slot on the busiest host.
    """
    elastic = _bool_option(job, "elastic", False)
    given_range = job.options.get("port_range")
    given_runner = job.options.get("runner_port")
    given_config = job.options.get("config_port")
    need = (given_runner is None) + (elastic and given_config is None)
    need += peers_per_host if given_range is None else 0
    also = (MONITORING_PORT_OFFSET,) if _bool_option(job, "monitoring", False) else ()
    free = port_block(hosts, need, also=also) if need else 0
    if given_runner is None:
        runner, free = free, free + 1
    else:
        runner = port_option(job, "runner_port", 0)
    if given_config is not None:
        config = port_option(job, "config_port", 0)
    elif elastic:
        config, free = free, free + 1
    else:
        config = 0  # no config server outside elastic mode
    if given_range is None:
        port_range = f"{free}-{free + peers_per_host - 1}"
    else:
        _port_begin(str(given_range))
        port_range = str(given_range)
    return port_range, runner, config


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
        port_range: the peers' ports, "BEGIN-END" (default: a free block per job).
        runner_port: kungfu-run's own port, ``-port`` (default: a free one per job).
        quiet: ``-q`` (default True).
        monitoring: set ``KUNGFU_CONFIG_ENABLE_MONITORING=true`` so that
            ``kungfu.tensorflow.ops.egress_rates`` measures (default False).
        elastic: watch mode (``-w``) with KungFu's config server (default False).
        max_np: elastic mode's largest size (default np); ``-H`` lists that many slots.
        config_port: the config server's port on the first host (default: a free one).

    Ports: every job takes its own free ports (lab.cluster.ports), the same on every host,
    so two jobs on one machine never collide.
    """

    name = "kungfu"
    reporter = "kungfu-run"  # whose words name a failed peer (blame)
    wants_run_dir = True  # launch() adds options["run_dir"] for -logdir

    def __init__(self, program: str = "kungfu-run") -> None:
        self.program = program

    def check(self, job: Job) -> None:
        if find_program(self.program) is None:
            raise LaunchError(INSTALL_KUNGFU)
        _port_begin(job.options.get("port_range"))
        for name, default in (("quiet", True), ("monitoring", False), ("elastic", False)):
            _bool_option(job, name, default)
        for name in ("config_port", "runner_port"):
            if job.options.get(name) is not None:
                port_option(job, name, 0)
        # emulated hosts get their IPv4 addresses when the cluster is brought up, a Slurm
        # job's nodes when it is allocated
        if job.cluster is not None and not (job.cluster.emulated or job.cluster.slurm):
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
        hosts = [h for h, _ in capacity]
        port_range, runner_port, config_port = job_ports(job, hosts, max(n for _, n in capacity))
        nic = job.options.get("nic")
        env = base_env(job)
        if _bool_option(job, "monitoring", False):
            env = {**MONITORING_ENV, **env}
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
            argv += ["-port-range", port_range, "-port", str(runner_port)]
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
        if tagged is None:
            return Line(None, stream, text)
        ip, port, tag_stream, body = tagged
        rank = self._rank(spec, ip, port)
        if rank is None:
            return Line(None, stream, text)
        return Line(rank, tag_stream, body)

    def blame(self, spec: ProcessSpec, said: Sequence[str]) -> list[RankEnd]:
        """The peers kungfu-run says exited with an error, the first first
        (lab.cluster.blame)."""
        return kungfu_ends(said, lambda ip, port: self._rank(spec, ip, port))

    def _rank(self, spec: ProcessSpec, ip: str, port: int) -> int | None:
        """The rank of peer ``ip``:``port`` among ``spec``'s (None: not one of them)."""
        host_list = _flag(spec.argv, "-H")
        if host_list is None:
            return None
        begin = _port_begin(_flag(spec.argv, "-port-range"))
        rank = peer_ranks(host_list, begin, "-w" in spec.argv).get((ip, port))
        return rank if rank in spec.ranks else None
