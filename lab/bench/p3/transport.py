"""Messages between worker and server shards over gloo point-to-point (``isend``/``irecv``).

Why gloo point-to-point and not ``torch.distributed.rpc``: the schedule under test *is* the
order in which bytes leave a host, so the lab must decide exactly when each message is
handed to the transport and must see when it has been taken; ``isend`` + ``wait`` gives
that with one TCP connection per pair of hosts and no hidden thread pool or buffering of
its own (TensorPipe's would reorder and batch behind the lab's back).

A message is a 3-integer header (type, key, step) on tag 0, then, for pushes and values,
the payload on a tag of its own per (type, key). gloo delivers only into posted receives,
so every receive a peer can send is posted ahead: a ring of header receives per peer and
one payload receive per (type, key) that peer sends to this host. One thread per peer
waits on the headers in arrival order and hands each message on.

What is in flight below the lab is bounded in two ways: a sender hands one message at a
time to gloo and waits until gloo has written it into the socket, and every gloo socket's
kernel buffers are set small (``SO_SNDBUF``/``SO_RCVBUF``, ``shrink_socket_buffers``), so a
message waits in the lab's own (priority) queue, not in a multi-megabyte kernel FIFO.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import stat
import threading
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)

PUSH, ACK, PULL, VALUE, STOP = 1, 2, 3, 4, 5
NAMES = {PUSH: "push", ACK: "ack", PULL: "pull", VALUE: "value", STOP: "stop"}
HEADER_TAG = 0


def payload_tag(kind: int, key: int) -> int:
    """The gloo tag of a payload: pushes and values of each key have their own."""
    return 1 + 2 * key + (1 if kind == VALUE else 0)


def shrink_socket_buffers(nbytes: int) -> list[tuple[int, int]]:
    """Set SO_SNDBUF and SO_RCVBUF of every connected TCP socket of this process (gloo's
    pairs, and the rendezvous store's) to ``nbytes``; the (send, receive) sizes the kernel
    reports for each (it doubles the request for its bookkeeping)."""
    sizes = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            sock = socket.socket(fileno=fd)
        except OSError:
            continue
        try:
            if sock.type != socket.SOCK_STREAM or sock.family not in (
                socket.AF_INET,
                socket.AF_INET6,
            ):
                continue
            try:
                sock.getpeername()
            except OSError:
                continue  # a listening socket
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, nbytes)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, nbytes)
            sizes.append(
                (
                    sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                    sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
                )
            )
        finally:
            sock.detach()
    return sizes


Deliver = Callable[[int, int, int, int, Any], None]  # (kind, key, step, src, payload)


class Wire:
    """Sending and receiving the parameter server's messages with one peer set.

    Args:
        rank: this host's rank.
        expect: ``expect[peer]`` lists, per step, the (kind, key, numel) messages ``peer``
            sends to this host (payload-less kinds with numel 0).
        steps: how many steps the run has (so no receive is left posted at the end).
        deliver: called from the receiving threads with each message.
    """

    def __init__(
        self,
        rank: int,
        expect: dict[int, Sequence[tuple[int, int, int]]],
        steps: int,
        deliver: Deliver,
    ) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.rank, self.deliver = rank, deliver
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.errors: list[BaseException] = []
        self.sent_bytes: collections.Counter[int] = collections.Counter()  # per step
        self.peers = {}
        for peer, per_step in expect.items():
            sizes = {(k, key): n for k, key, n in per_step if n > 0}
            total = len(per_step) * steps + 1  # + STOP
            self.peers[peer] = (sizes, total, steps)

    def start(self) -> None:
        for peer in self.peers:
            t = threading.Thread(target=self._receive, args=(peer,), daemon=True)
            t.start()
            self.threads.append(t)

    def send(self, dst: int, kind: int, key: int, step: int, payload: Any = None) -> None:
        """Hand one message to gloo and wait until it has left the lab (written to the
        socket): one message in flight per sending thread. Counts the bytes handed over
        (header and payload) per step in ``sent_bytes``, before handing them over, so that
        once a peer has a message its bytes are counted here."""
        torch, dist = self.torch, self.dist
        header = torch.tensor([kind, key, step], dtype=torch.int64)
        size = header.numel() * header.element_size()
        if payload is not None:
            size += payload.numel() * payload.element_size()
        with self._lock:
            self.sent_bytes[step] += size
        works = [dist.isend(header, dst, tag=HEADER_TAG)]
        if payload is not None:
            works.append(dist.isend(payload.contiguous(), dst, tag=payload_tag(kind, key)))
        for w in works:
            w.wait()

    def stop(self) -> None:
        """Tell every peer this host sends nothing more; wait for their receivers' end."""
        for peer in self.peers:
            self.send(peer, STOP, 0, 0)
        for t in self.threads:
            t.join(timeout=60)

    def _receive(self, peer: int) -> None:
        torch, dist = self.torch, self.dist
        sizes, total, steps = self.peers[peer]
        ahead = min(total, 2 * len(sizes) + 16)
        headers: collections.deque = collections.deque()
        posted = 0

        def post_header() -> None:
            nonlocal posted
            buf = torch.empty(3, dtype=torch.int64)
            headers.append((buf, dist.irecv(buf, peer, tag=HEADER_TAG)))
            posted += 1

        def post_payload(kind: int, key: int) -> tuple[Any, Any]:
            buf = torch.empty(sizes[(kind, key)])
            return buf, dist.irecv(buf, peer, tag=payload_tag(kind, key))

        payloads = {kk: [post_payload(*kk), 1] for kk in sizes}
        for _ in range(ahead):
            post_header()
        try:
            while headers:
                buf, work = headers.popleft()
                work.wait()
                if posted < total:
                    post_header()
                kind, key, step = (int(v) for v in buf.tolist())
                if kind == STOP:
                    return
                data = None
                if (kind, key) in sizes:
                    slot = payloads[(kind, key)]
                    (data, pwork), used = slot
                    pwork.wait()
                    if used < steps:
                        slot[0], slot[1] = post_payload(kind, key), used + 1
                self.deliver(kind, key, step, peer, data)
        except BaseException as e:  # surfaced by the main loop
            log.exception("receiving from rank %d failed", peer)
            with self._lock:
                self.errors.append(e)
