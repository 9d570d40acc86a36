"""Messages between worker and server shards: one TCP connection per pair of hosts.

Why plain sockets and neither gloo point-to-point nor ``torch.distributed.rpc``: the
schedule under test *is* the order in which bytes leave a host, so the lab must decide
exactly when each message is handed to the transport and see when it has been taken, and
P3's slices make a step ~170 messages a host, so what a message costs besides its bytes
decides what the schedule costs. RPC's TensorPipe reorders and batches behind the lab's
back. gloo's send/recv gave the control, but every gloo message cost 0.1-0.2 ms of CPU on
each side whatever its size (its device thread hands each one over), and that was P3's
~10% over baseline on loopback (``make bench``). A 160 KB message over a socket of its own
cost 35-45 µs at either end on the same machine (2 processes on loopback, 128 KB socket
buffers), and the sender writes a payload straight from the tensor it lives in.

A message is a header of ``HEADER`` int32 (kind, key, step, payload elements) followed by
the payload, if any, in float32. Each host listens on a port of its own (the kernel's
choice), the addresses are exchanged over the job's process group (``all_gather_object``),
and a rank connects to every lower rank. One thread per peer reads that peer's messages in
order: a payload is received straight where it belongs (a worker's parameter slice for a
value, else a buffer of the Wire's own); a kind the receiver borrows (``lend``: a server's
pushes, which it mostly sums at once) lands in one reused buffer, handed on as a view valid
only during the call.

What is in flight below the lab is bounded in two ways: a sender hands one message at a
time to the kernel and returns once it is all written into the socket, and every socket's
kernel buffers are set small (``SO_SNDBUF``/``SO_RCVBUF``, ``sockbuf``), so a message waits
in the lab's own (priority) queue, not in a multi-megabyte kernel FIFO.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import struct
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

PUSH, ACK, PULL, VALUE, STOP = 1, 2, 3, 4, 5
NAMES = {PUSH: "push", ACK: "ack", PULL: "pull", VALUE: "value", STOP: "stop"}
HEADER = 4  # int32 before a payload: kind, key, step, payload elements
_HEADER = struct.Struct("=4i")
CONNECT_S = 60.0  # for every peer to connect (all start together, past a barrier)


def _set_buffers(sock: socket.socket, nbytes: int) -> None:
    """``nbytes`` as the socket's kernel buffers (0: leave the kernel's)."""
    if nbytes:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, nbytes)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, nbytes)


def _buffer_sizes(sock: socket.socket) -> tuple[int, int]:
    """The socket's (send, receive) buffer sizes as the kernel reports them (it doubles a
    request for its bookkeeping)."""
    return (
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
    )


def _bytes(tensor: Any) -> memoryview:
    """A float32 tensor's memory as bytes, without a copy."""
    return memoryview(tensor.detach().numpy()).cast("B")


def _local_address() -> str:
    """The address peers reach this host at: the one its route to the job's rendezvous
    (MASTER_ADDR) leaves from — loopback for a local job, the host's own in a cluster."""
    master = os.environ.get("MASTER_ADDR", "127.0.0.1")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((master, 9))  # no packet is sent: this only picks the route
        return str(probe.getsockname()[0])


def connect_peers(rank: int, peers: Sequence[int], sockbuf: int) -> dict[int, socket.socket]:
    """One connected TCP socket to each of ``peers``: this rank listens on its own address,
    every rank's address goes round the process group, a rank connects to each lower one
    and says who it is; a connection from elsewhere, or a rank twice, is refused.
    Collective: every rank of the job calls it."""
    import torch.distributed as dist

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        _set_buffers(listener, sockbuf)  # accepted sockets inherit them
        listener.bind((_local_address(), 0))  # the job's own address, a port of its own
        listener.listen(len(peers) + 1)
        listener.settimeout(CONNECT_S)
        addresses: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(addresses, listener.getsockname()[:2])
        socks: dict[int, socket.socket] = {}
        for peer in sorted(p for p in peers if p < rank):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            _set_buffers(sock, sockbuf)
            sock.bind((addresses[rank][0], 0))  # from the address the peer knows
            sock.settimeout(CONNECT_S)
            sock.connect(tuple(addresses[peer]))
            sock.sendall(struct.pack("=i", rank))
            socks[peer] = sock
        while len(socks) < len(peers):
            sock, (host, _) = listener.accept()
            sock.settimeout(CONNECT_S)
            peer = struct.unpack("=i", _read(sock, 4))[0]
            if peer not in peers or peer in socks or host != addresses[peer][0]:
                log.warning("refused a connection from %s claiming rank %d", host, peer)
                sock.close()
                continue
            socks[peer] = sock
    finally:
        listener.close()
    for sock in socks.values():
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return socks


def _read(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    _read_into(sock, memoryview(buf))
    return bytes(buf)


def _read_into(sock: socket.socket, view: memoryview) -> None:
    """Fill ``view`` from the socket (one call, MSG_WAITALL, unless a signal cuts it short);
    ConnectionError if the peer closes first."""
    n = len(view)
    got = sock.recv_into(view, n, socket.MSG_WAITALL)
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError(f"peer closed after {got} of {n} bytes")
        got += k


Deliver = Callable[[int, int, int, int, Any], None]  # (kind, key, step, src, payload)


class Wire:
    """Sending and receiving the parameter server's messages with one peer set.

    Every payload is received into memory allocated once, reused every step: a peer sends
    the next message of a (kind, key) only after this host has answered the last one
    (a worker pushes key k again only after its value came back; a server sends k's value
    again only after the next push), so a payload buffer is free again by the time its
    next message can arrive, and ``deliver``'s receiver may keep reading it until it
    answers. Two threads of a host (its worker's and its server's senders) may send to one
    peer: a lock per peer keeps their messages whole.

    Args:
        rank: this host's rank.
        expect: ``expect[peer]`` lists, per step, the (kind, key, numel) messages ``peer``
            sends to this host (payload-less kinds with numel 0).
        steps: how many steps the run has.
        deliver: called from the receiving threads with each message.
        into: where the payload of a (kind, key) that only one peer sends is received
            (a worker's parameter slice for a value: nothing to copy it on to); the others
            get a buffer of the Wire's own.
        inline: the most payload elements a lent message has (P3's slice size); a bigger
            payload of a lent kind gets a buffer of its own.
        lend: kinds whose payload ``deliver`` gets as a view of a receive buffer reused for
            the next message, valid only until it returns (it copies what it keeps).
        sockbuf: the sockets' kernel buffers in bytes (0: the kernel's).
        steady: kinds whose payload for a key is the same tensor in every message (a
            server's values: its shard's own tensors), so their bytes are looked up once.
    """

    def __init__(
        self,
        rank: int,
        expect: dict[int, Sequence[tuple[int, int, int]]],
        steps: int,
        deliver: Deliver,
        into: Mapping[tuple[int, int], Any] | None = None,
        inline: int = 40_000,
        lend: frozenset[int] = frozenset(),
        sockbuf: int = 0,
        steady: frozenset[int] = frozenset(),
    ) -> None:
        import torch

        self.rank, self.deliver = rank, deliver
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.errors: list[BaseException] = []
        self.peers = {}
        into = into or {}
        for peer, per_step in expect.items():
            buffers = {
                (k, key): into[(k, key)] if (k, key) in into else torch.empty(n)
                for k, key, n in per_step
                if n > 0 and not (k in lend and n <= inline and (k, key) not in into)
            }
            lent = {(k, key): n for k, key, n in per_step if n > 0 and (k, key) not in buffers}
            targets = {kk: (b, _bytes(b)) for kk, b in buffers.items()}
            scratch = torch.empty(max(lent.values(), default=0))
            self.peers[peer] = (targets, lent, scratch)
        self.socks = connect_peers(rank, sorted(expect), sockbuf)
        self.socket_buffers = [_buffer_sizes(s) for s in self.socks.values()]
        # per peer: its socket, the lock that keeps two threads' messages to it whole, and
        # the bytes handed to it per step (counted under that lock)
        self._out = {
            peer: (sock, threading.Lock(), collections.Counter[int]())
            for peer, sock in self.socks.items()
        }
        # a steady kind's payload for a key is the same tensor every step (a server's
        # values): its bytes' view is made once
        self._steady = steady
        self._views: dict[tuple[int, int], memoryview] = {}

    @property
    def sent_bytes(self) -> collections.Counter[int]:
        """Bytes handed to the kernel per step (headers and payloads), to all peers."""
        total: collections.Counter[int] = collections.Counter()
        for _, lock, sent in self._out.values():
            with lock:
                total.update(sent)
        return total

    def lent_keys(self, kind: int) -> frozenset[int]:
        """The keys whose ``kind`` messages ``deliver`` gets lent (see ``lend``), from any peer."""
        return frozenset(key for _, lent, _ in self.peers.values() for k, key in lent if k == kind)

    def start(self) -> None:
        for peer in self.peers:
            t = threading.Thread(target=self._receive, args=(peer,), daemon=True)
            t.start()
            self.threads.append(t)

    def send(self, dst: int, kind: int, key: int, step: int, payload: Any = None) -> None:
        """Write one message into ``dst``'s socket and return once the kernel has all of it:
        one message in flight per sending thread. Counts the bytes handed over (header and
        payload) per step in ``sent_bytes``, before handing them over, so that once a peer
        has a message its bytes are counted here."""
        n = 0 if payload is None else payload.numel()
        header = _HEADER.pack(kind, key, step, n)
        sock, lock, sent_bytes = self._out[dst]
        with lock:
            sent_bytes[step] += 4 * (HEADER + n)
            if not n:
                sock.sendall(header)
                return
            if kind in self._steady:
                body = self._views.get((kind, key))
                if body is None:
                    body = self._views[(kind, key)] = _bytes(payload)
            else:
                body = _bytes(payload)
            sent = sock.sendmsg((header, body))  # a blocking socket takes it all but for a signal
            if sent < len(header):
                sock.sendall(header[sent:])
                sent = len(header)
            if sent - len(header) < len(body):
                sock.sendall(body[sent - len(header) :])

    def stop(self) -> None:
        """Tell every peer this host sends nothing more; wait for their receivers' end."""
        for peer in self.peers:
            self.send(peer, STOP, 0, 0)
        for t in self.threads:
            t.join(timeout=60)
        for sock in self.socks.values():
            sock.close()

    def _receive(self, peer: int) -> None:
        sock = self.socks[peer]
        targets, _, scratch = self.peers[peer]
        scratch_bytes = _bytes(scratch)
        lent_views: dict[int, Any] = {}  # the scratch buffer's first n elements, per n
        header = bytearray(_HEADER.size)
        header_view = memoryview(header)
        try:
            while True:
                _read_into(sock, header_view)
                kind, key, step, n = _HEADER.unpack(header)
                if kind == STOP:
                    return
                if not n:
                    self.deliver(kind, key, step, peer, None)
                    continue
                target = targets.get((kind, key))
                if target is not None:
                    data, into = target
                    _read_into(sock, into)
                else:  # lent: the reused buffer, until deliver returns
                    _read_into(sock, scratch_bytes[: 4 * n])
                    data = lent_views.get(n)
                    if data is None:
                        data = lent_views[n] = scratch[:n]
                self.deliver(kind, key, step, peer, data)
        except BaseException as e:  # surfaced by the main loop
            log.exception("receiving from rank %d failed", peer)
            with self._lock:
                self.errors.append(e)
