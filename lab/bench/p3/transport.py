"""Messages between worker and server shards over gloo point-to-point (send/recv).

Why gloo point-to-point and not ``torch.distributed.rpc``: the schedule under test *is* the
order in which bytes leave a host, so the lab must decide exactly when each message is
handed to the transport and must see when it has been taken; a send + ``wait`` gives
that with one TCP connection per pair of hosts and no hidden thread pool or buffering of
its own (TensorPipe's would reorder and batch behind the lab's back).

A message is one gloo message on tag 0: a header of ``HEADER`` int32 (type, key, step,
0) followed by the payload, if any, of up to ``inline`` float32 elements (P3's slice size:
every slice travels this way). Every gloo message costs about 0.1 ms of CPU on each side
whatever its size (a 12-byte message cost 130 µs at the sender and 113 µs at the receiver
of a loaded 2-core machine, a 160 KB one 227 and 177), so a header of its own would nearly
double what a slice costs. A bigger payload (baseline's parts of megabytes) follows its
header as a second message, on a tag of its own per (type, key). gloo delivers only into
posted receives, and accepts a message shorter than the receive: every peer has a ring of
receives of the largest inline message posted ahead on tag 0, and one receive per
(type, key) of a bigger payload. One thread per peer waits on the ring in arrival order,
copies an inline payload out (into the parameter slice, for a value), posts the receive
again and hands the message on. A kind the receiver asks to borrow (``lend``: a server's
pushes, which it mostly sums at once) is handed on as a view of the ring's buffer, valid
only during the call, and not copied at all.

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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

PUSH, ACK, PULL, VALUE, STOP = 1, 2, 3, 4, 5
NAMES = {PUSH: "push", ACK: "ack", PULL: "pull", VALUE: "value", STOP: "stop"}
HEADER_TAG = 0
HEADER = 4  # int32 slots before an inline payload: kind, key, step, 0 (16-byte aligned)
RING = 32  # receives on tag 0 posted ahead per peer


def payload_tag(kind: int, key: int) -> int:
    """The gloo tag of a payload too big to travel inline: one per (kind, key)."""
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

    Every payload is received into a buffer allocated once, reused every step: a peer sends
    the next message of a (kind, key) only after this host has answered the last one
    (a worker pushes key k again only after its value came back; a server sends k's value
    again only after the next push), so a payload buffer is free again by the time its
    next message can arrive, and ``deliver``'s receiver may keep reading it until it
    answers. Messages go straight to the process group's ``send``/``recv`` (what
    ``dist.isend``/``irecv`` call after their per-call checks); each sending thread builds
    its messages in one tensor of its own.

    Args:
        rank: this host's rank.
        expect: ``expect[peer]`` lists, per step, the (kind, key, numel) messages ``peer``
            sends to this host (payload-less kinds with numel 0).
        steps: how many steps the run has (so no receive is left posted at the end).
        deliver: called from the receiving threads with each message.
        into: where the payload of a (kind, key) that only one peer sends is received
            (a worker's parameter slice for a value: nothing to copy it on to); the others
            get a buffer of the Wire's own.
        inline: the most payload elements a message carries after its header; bigger
            payloads follow as a message of their own.
        lend: kinds whose inline payload ``deliver`` gets as a view of the receive buffer,
            valid only until it returns (it copies what it keeps), instead of a copy.
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
    ) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.group = torch, dist.group.WORLD
        self.rank, self.deliver, self.inline = rank, deliver, inline
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._local = threading.local()  # per sending thread: the tensor it builds messages in
        self.errors: list[BaseException] = []
        self.sent_bytes: collections.Counter[int] = collections.Counter()  # per step
        self.peers = {}
        into = into or {}
        for peer, per_step in expect.items():
            buffers = {
                (k, key): into[(k, key)] if (k, key) in into else torch.empty(n)
                for k, key, n in per_step
                if n > 0 and not (k in lend and n <= inline and (k, key) not in into)
            }
            lent = {(k, key): n for k, key, n in per_step if n > 0 and (k, key) not in buffers}
            total = len(per_step) * steps + 1  # + STOP
            self.peers[peer] = (buffers, lent, total, steps)

    def lent_keys(self, kind: int) -> frozenset[int]:
        """The keys whose ``kind`` messages ``deliver`` gets lent (see ``lend``), from any peer."""
        return frozenset(
            key for _, lent, _, _ in self.peers.values() for k, key in lent if k == kind
        )

    def start(self) -> None:
        for peer in self.peers:
            t = threading.Thread(target=self._receive, args=(peer,), daemon=True)
            t.start()
            self.threads.append(t)

    def _message(self) -> tuple[Any, Any, dict[int, tuple[Any, Any]]]:
        """A buffer for one header and the largest inline payload, its header's slots as
        int32 (numpy: written without a torch call), and its views by payload size
        (``_views``)."""
        buf = self.torch.zeros(HEADER + self.inline)
        return buf, buf.numpy()[:HEADER].view("int32"), {}

    @staticmethod
    def _views(buf: Any, views: dict[int, tuple[Any, Any]], n: int) -> tuple[Any, Any]:
        """(payload, header + payload) views of ``buf`` for an ``n``-element payload, made
        once per size: a model has a few slice sizes, and a tensor view costs microseconds
        on every one of a step's ~170 messages."""
        found = views.get(n)
        if found is None:
            found = views[n] = (buf[HEADER : HEADER + n], buf[: HEADER + n])
        return found

    def send(self, dst: int, kind: int, key: int, step: int, payload: Any = None) -> None:
        """Hand one message to gloo and wait until it has left the lab (written to the
        socket): one message in flight per sending thread. Counts the bytes handed over
        (header and payload) per step in ``sent_bytes``, before handing them over, so that
        once a peer has a message its bytes are counted here."""
        mine = getattr(self._local, "message", None)
        if mine is None:
            mine = self._local.message = self._message()
        buf, header, views = mine
        header[0], header[1], header[2] = kind, key, step
        n = 0 if payload is None else payload.numel()
        with self._lock:
            self.sent_bytes[step] += 4 * (HEADER + n)
        if n <= self.inline:
            body, whole = self._views(buf, views, n)
            if n:
                body.copy_(payload)
            self.group.send([whole], dst, HEADER_TAG).wait()
            return
        head = self.group.send([buf[:HEADER]], dst, HEADER_TAG)
        body = self.group.send([payload.contiguous()], dst, payload_tag(kind, key))
        head.wait()
        body.wait()

    def stop(self) -> None:
        """Tell every peer this host sends nothing more; wait for their receivers' end."""
        for peer in self.peers:
            self.send(peer, STOP, 0, 0)
        for t in self.threads:
            t.join(timeout=60)

    def _receive(self, peer: int) -> None:
        recv, inline = self.group.recv, self.inline
        buffers, lent, total, steps = self.peers[peer]
        ring: collections.deque = collections.deque()
        for _ in range(min(total, RING)):
            buf, header, views = self._message()
            ring.append((buf, header, views, recv([buf], peer, HEADER_TAG)))
        posted = len(ring)
        big = {  # [buffer, its posted receive, receives posted so far]
            kk: [b, recv([b], peer, payload_tag(*kk)), 1]
            for kk, b in buffers.items()
            if b.numel() > inline
        }
        try:
            while ring:
                buf, header, views, work = ring.popleft()
                work.wait()
                kind, key, step = header[:3].tolist()
                if kind == STOP:
                    return
                lent_n = lent.get((kind, key))
                if lent_n is not None:  # the ring's buffer itself, until deliver returns
                    self.deliver(kind, key, step, peer, self._views(buf, views, lent_n)[0])
                elif (data := buffers.get((kind, key))) is not None:
                    n = data.numel()
                    if n <= inline:
                        data.copy_(self._views(buf, views, n)[0])
                    else:  # its own message, on its own tag; free again (see the class)
                        slot = big[(kind, key)]
                        slot[1].wait()
                        if slot[2] < steps:
                            slot[1] = recv([data], peer, payload_tag(kind, key))
                            slot[2] += 1
                if posted < total:  # read, and copied out or handed back: post it again
                    ring.append((buf, header, views, recv([buf], peer, HEADER_TAG)))
                    posted += 1
                if lent_n is None:
                    self.deliver(kind, key, step, peer, data)
        except BaseException as e:  # surfaced by the main loop
            log.exception("receiving from rank %d failed", peer)
            with self._lock:
                self.errors.append(e)
