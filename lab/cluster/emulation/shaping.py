"""Link shaping with tc: a rate limit (HTB) and, where the kernel has netem, added delay.

Each host link is shaped at both ends of its veth pair: the root-namespace end shapes
traffic into the host, the ``eth0`` end traffic out of it, so a link behaves like a
full-duplex NIC of the given bandwidth. The layout is Mininet's (HTB class, netem leaf).
"""

from __future__ import annotations

import logging

from lab.cluster.emulation.netns import CommandError, run

log = logging.getLogger(__name__)


def _burst(rate_bits: float) -> int:
    """Bytes HTB may send at once: enough for 1 ms of traffic at high rates, 15 kB at least."""
    return max(15_000, int(rate_bits / 8 * 1e-3))


def shape(dev: str, netns: str | None, bandwidth: float | None, latency: float) -> bool:
    """Shape ``dev`` (in ``netns``, or the root namespace for None).

    Returns:
        Whether the latency was applied: False when it was asked for but this kernel has
        no netem qdisc (the rate limit is applied either way).
    """
    if bandwidth is None and latency <= 0:
        return True
    tc = ["tc", "-n", netns] if netns else ["tc"]
    rate = f"{int(bandwidth if bandwidth is not None else 100e9)}bit"
    burst = str(_burst(bandwidth if bandwidth is not None else 100e9))
    run([*tc, "qdisc", "replace", "dev", dev, "root", "handle", "5:", "htb", "default", "1"])
    run([*tc, "class", "add", "dev", dev, "parent", "5:", "classid", "5:1", "htb",
         "rate", rate, "ceil", rate, "burst", burst, "cburst", burst])  # fmt: skip
    if latency <= 0:
        return True
    try:
        run([*tc, "qdisc", "add", "dev", dev, "parent", "5:1", "handle", "10:", "netem",
             "delay", f"{latency * 1e6:.0f}us", "limit", "10000"])  # fmt: skip
    except CommandError as e:
        if "unknown" in e.stderr.lower():
            return False
        raise
    return True


def show(dev: str, netns: str | None = None) -> str:
    """The qdiscs and classes on a device (``tc qdisc/class show``), for logs and tests."""
    tc = ["tc", "-n", netns] if netns else ["tc"]
    return run([*tc, "qdisc", "show", "dev", dev]) + run([*tc, "class", "show", "dev", dev])
