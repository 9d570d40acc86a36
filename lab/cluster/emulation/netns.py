"""Network namespaces, the bridge that joins them, and veth pairs, through iproute2's ``ip``.

Each emulated host is a namespace holding one end of a veth pair (named ``eth0`` there);
the other end sits on a bridge in the root namespace. Hosts share one L2 segment, so no
routing or forwarding is needed; the bridge carries an address so that the lab's own
processes (e.g. ``mpirun``) reach the hosts too.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import subprocess
from collections.abc import Iterable, Sequence

from lab.errors import LaunchError

log = logging.getLogger(__name__)
TIMEOUT = 15.0
HOST_IFNAME = "eth0"
DEFAULT_POOL = ipaddress.IPv4Network("10.231.0.0/16")


class CommandError(LaunchError):
    """An iproute2/tc command failed; carries its stderr."""

    def __init__(self, argv: Sequence[str], stderr: str) -> None:
        self.argv, self.stderr = list(argv), stderr.strip()
        super().__init__(f"{' '.join(argv)} failed: {self.stderr or 'no message'}")


def run(argv: Sequence[str], timeout: float = TIMEOUT, check: bool = True) -> str:
    """Run one command (argv list, bounded in time); its stdout, or CommandError."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise LaunchError(f"{' '.join(argv)} did not finish within {timeout:g} s") from None
    except FileNotFoundError:
        msg = f"{argv[0]!r} is not installed (Debian: apt-get install iproute2)"
        raise LaunchError(msg) from None
    if check and done.returncode != 0:
        raise CommandError(argv, done.stderr)
    return done.stdout


def _gone(err: CommandError) -> bool:
    text = err.stderr.lower()
    return any(s in text for s in ("cannot find device", "no such file", "does not exist"))


def list_netns() -> list[str]:
    out = run(["ip", "-j", "netns", "list"])
    return [entry["name"] for entry in json.loads(out or "[]")]


def list_links() -> list[str]:
    """Names of the root namespace's links (a veth's peer inside a namespace is not one)."""
    return [link["ifname"] for link in json.loads(run(["ip", "-j", "link", "show"]) or "[]")]


def used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network this machine already routes or holds an address in."""
    nets: list[ipaddress.IPv4Network] = []
    for route in json.loads(run(["ip", "-j", "-4", "route", "show", "table", "all"]) or "[]"):
        dst = route.get("dst", "")
        if dst and dst != "default":
            nets.append(ipaddress.IPv4Network(dst, strict=False))
    for link in json.loads(run(["ip", "-j", "-4", "addr", "show"]) or "[]"):
        for a in link.get("addr_info", []):
            nets.append(ipaddress.IPv4Network(f"{a['local']}/{a['prefixlen']}", strict=False))
    return nets


def pick_subnet(
    requested: ipaddress.IPv4Network | None, also_taken: Iterable[ipaddress.IPv4Network] = ()
) -> ipaddress.IPv4Network:
    """The requested subnet if free, else the first free /24 of 10.231.0.0/16.

    Raises:
        LaunchError: the subnet is routed here already, or the pool is exhausted.
    """
    taken = [*used_networks(), *also_taken]
    if requested is not None:
        clash = [str(n) for n in taken if n.overlaps(requested)]
        if clash:
            raise LaunchError(
                f"emulated subnet {requested} is already in use on this machine "
                f"(overlaps {', '.join(sorted(set(clash)))}); set emulated.subnet to a free one"
            )
        return requested
    for net in DEFAULT_POOL.subnets(new_prefix=24):
        if net.network_address.packed[2] == 0:
            continue
        if not any(n.overlaps(net) for n in taken):
            return net
    raise LaunchError(f"no free /24 left in {DEFAULT_POOL}; set emulated.subnet in the profile")


def create_bridge(name: str, address: str) -> None:
    run(["ip", "link", "add", "name", name, "type", "bridge"])
    run(["ip", "addr", "add", address, "dev", name])
    run(["ip", "link", "set", "dev", name, "up"])


def create_host(netns: str, veth: str, bridge: str, address: str) -> None:
    """A namespace with ``lo`` up and ``eth0`` at ``address`` (CIDR), wired to ``bridge``."""
    run(["ip", "netns", "add", netns])
    run(["ip", "link", "add", "name", veth, "type", "veth", "peer", "name", HOST_IFNAME,
         "netns", netns])  # fmt: skip
    run(["ip", "link", "set", "dev", veth, "master", bridge])
    run(["ip", "link", "set", "dev", veth, "up"])
    run(["ip", "-n", netns, "addr", "add", address, "dev", HOST_IFNAME])
    run(["ip", "-n", netns, "link", "set", "dev", HOST_IFNAME, "up"])
    run(["ip", "-n", netns, "link", "set", "dev", "lo", "up"])


def netns_pids(netns: str) -> list[int]:
    out = run(["ip", "netns", "pids", netns], check=False)
    return [int(p) for p in out.split() if p.isdigit()]


def delete_link(name: str) -> None:
    """Delete a link (a veth's other end goes with it); absent is fine."""
    try:
        run(["ip", "link", "del", "dev", name])
    except CommandError as e:
        if not _gone(e):
            raise


def delete_netns(name: str) -> None:
    try:
        run(["ip", "netns", "del", name])
    except CommandError as e:
        if not _gone(e):
            raise
