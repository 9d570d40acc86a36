"""lab.cluster.ports: a block is free on this machine when a host is here, never one a
listener holds, never one already handed out, and always inside LOW..HIGH."""

from __future__ import annotations

import random
import socket

import pytest

from lab.cluster import ports
from lab.cluster.inventory import Host

HERE = [Host("localhost", slots=2)]
FAR = [Host("node7", slots=2)]


@pytest.fixture(autouse=True)
def nothing_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no block handed out: launchers built earlier in the same
    process hold blocks for a minute, and a proposed start among them would be passed over,
    leaving a test's scripted proposals one short."""
    monkeypatch.setattr(ports, "_given", {})


def test_blocks_are_in_range_and_never_handed_out_twice():
    blocks = [set(range(b, b + 8)) for b in (ports.port_block(HERE, 8) for _ in range(20))]
    assert all(min(b) >= ports.LOW and max(b) < ports.HIGH for b in blocks)
    for i, a in enumerate(blocks):
        for b in blocks[i + 1 :]:
            assert not a & b


class Proposals(random.Random):
    """A random source that proposes the given starts in turn."""

    def __init__(self, *starts: int) -> None:
        super().__init__()
        self.starts = iter(starts)

    def randrange(self, *args: int) -> int:  # type: ignore[override]
        return next(self.starts)


def listening() -> socket.socket:
    """A listener on a port the kernel chose (no port assumed free)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def spare(also: int = 0) -> int:
    """A port that is free now, and whose port ``also`` above is free and valid too
    (the kernel's ephemeral ports reach 60999, so +10000 can pass 65535)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not also or (port + also <= 65535 and ports.is_free(port + also)):
            return port
    pytest.skip(f"no free port found with its +{also} free too")


def test_a_port_a_listener_holds_is_skipped():
    """A listener on 127.0.0.1 makes its port busy for a probe on every address, and a
    block holding that port is passed over for the next proposal."""
    with listening() as held:
        port = held.getsockname()[1]
        assert not ports.is_free(port)
        other = spare()
        assert ports.port_block(HERE, 3, rng=Proposals(port - 1, other)) == other


def test_offsets_are_checked_too():
    """KungFu's monitoring takes port + 10000: that port must be free as well."""
    with listening() as held:
        port = held.getsockname()[1]
        if not ports.is_free(port - 10_000):
            pytest.skip("the port 10000 below the listener is taken here")
        other = spare(also=10_000)
        first = ports.port_block(HERE, 1, also=(10_000,), rng=Proposals(port - 10_000, other))
    assert first == other


def test_remote_hosts_are_not_probed_here():
    assert not ports.probes_here(FAR) and ports.probes_here(HERE)
    assert ports.probes_here([Host("h1", address="10.9.0.2", namespace="distlab-x-h1")])
    with listening() as held:  # a busy port here says nothing about a remote host
        port = held.getsockname()[1]
        assert ports.port_block(FAR, 1, rng=Proposals(port)) == port


def test_bad_count_is_refused():
    with pytest.raises(ValueError, match="count"):
        ports.port_block(HERE, 0)
