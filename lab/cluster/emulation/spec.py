"""What an ``emulated:`` profile section asks for, checked and in SI units.

Pure: turns ``{hosts: 4, cpu: 0.4, link: {bandwidth: 1gbit, latency: 1ms}, overrides: ...}``
into one HostSpec per host, so everything that touches the kernel works from numbers.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from lab.cluster.emulation.cgroups import MIN_CPU
from lab.cluster.emulation.fair import check_fair
from lab.cluster.emulation.startup import check_startup
from lab.errors import ParameterError

_RATE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]?)(bit|bps)?\s*$", re.I)
_TIME_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(s|ms|us|µs)?\s*$", re.I)
_RATE_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_TIME_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
KNOWN_KEYS = frozenset(
    {"hosts", "slots", "gpus", "cpu", "link", "overrides", "subnet", "sshd", "fair", "startup"}
)


@dataclass(frozen=True)
class HostSpec:
    """One emulated host's share of the machine.

    Args:
        name: the host's name in the cluster (``h1`` ...).
        cpu: cores it may use (cgroup quota); None for no limit.
        bandwidth: bits per second of its link, each direction; None for unshaped.
        latency: seconds added on its link, each direction; 0 for none.
    """

    name: str
    cpu: float | None
    bandwidth: float | None
    latency: float


def parse_rate(value: Any, what: str = "bandwidth") -> float | None:
    """Bits per second from ``1gbit``, ``100mbit``, ``1e9`` (tc's ``bps`` means bytes/s)."""
    if value is None:
        return None
    m = _RATE_RE.match(str(value))
    if not m:
        raise ParameterError(what, value, "a rate such as 100mbit, 1gbit, 10gbit (or bits/s)")
    number = float(m.group(1)) * _RATE_SCALE[m.group(2).lower()]
    if (m.group(3) or "").lower() == "bps":
        number *= 8
    if number <= 0:
        raise ParameterError(what, value, "a rate > 0")
    return number


def parse_time(value: Any, what: str = "latency") -> float:
    """Seconds from ``1ms``, ``500us``, ``0`` (a bare number means milliseconds, as tc)."""
    if value in (None, 0, "0"):
        return 0.0
    m = _TIME_RE.match(str(value))
    if not m:
        raise ParameterError(what, value, "a time such as 1ms, 500us, 0")
    return float(m.group(1)) * _TIME_SCALE[(m.group(2) or "ms").lower()]


def parse_cpu(value: Any, what: str = "cpu") -> float | None:
    if value is None:
        return None
    expected = f"cores as a number >= {MIN_CPU:g}, e.g. 0.4"  # the kernel caps no lower
    try:
        cpu = float(value)
    except (TypeError, ValueError):
        raise ParameterError(what, value, expected) from None
    if cpu < MIN_CPU:
        raise ParameterError(what, value, expected)
    return cpu


def host_specs(emulated: dict[str, Any], names: list[str]) -> list[HostSpec]:
    """One HostSpec per host name; ``overrides`` replace cpu or link fields per host."""
    unknown = set(emulated) - KNOWN_KEYS
    if unknown:
        raise ParameterError("emulated", sorted(unknown), f"keys among {sorted(KNOWN_KEYS)}")
    check_fair(emulated.get("fair"))
    check_startup(emulated.get("startup"))
    overrides = emulated.get("overrides") or {}
    stray = set(overrides) - set(names)
    if stray:
        raise ParameterError("emulated.overrides", sorted(stray), f"host names {names}")
    base_link = emulated.get("link") or {}
    specs = []
    for name in names:
        over = overrides.get(name) or {}
        link = {**base_link, **(over.get("link") or {})}
        specs.append(
            HostSpec(
                name=name,
                cpu=parse_cpu(over.get("cpu", emulated.get("cpu")), f"{name}.cpu"),
                bandwidth=parse_rate(link.get("bandwidth"), f"{name}.link.bandwidth"),
                latency=parse_time(link.get("latency"), f"{name}.link.latency"),
            )
        )
    return specs


def requested_subnet(emulated: dict[str, Any]) -> ipaddress.IPv4Network | None:
    """The subnet a profile pins with ``subnet: 10.231.5.0/24``, if any."""
    raw = emulated.get("subnet")
    if raw is None:
        return None
    try:
        net = ipaddress.IPv4Network(str(raw))
    except ValueError:
        allowed = "a private IPv4 network, e.g. 10.231.5.0/24"
        raise ParameterError("emulated.subnet", raw, allowed) from None
    if not net.is_private or net.prefixlen > 29:
        raise ParameterError("emulated.subnet", raw, "a private IPv4 network of /29 or larger")
    return net
