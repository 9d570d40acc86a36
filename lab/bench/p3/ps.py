"""The two roles every host plays: a worker (gradients out, parameters in, per-layer
forward waits) and a server shard (sums the workers' pushes of its keys, applies SGD,
answers). Both send through one ``SendQueue`` each, FIFO or by priority.

Schedules differ only here and in the key plan: ``baseline`` and ``slicing`` answer a
push with an acknowledgement once the key is updated, and the worker then sends a
separate pull; ``p3`` answers every push with the updated values (merged push/pull), and
its queues, at the worker and at the server, hand out the key of the layer nearest the
input first.

A message between a host's own worker and server shard never reaches a wire, so it skips
the send queues: the call is made where the message arises (the gradient hook, the
update). Through the queues each of a host's ~40 own slices a step woke two sending
threads — a cost of the lab's Python, not of P3's schedule, which orders what a host's
link carries.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from lab.bench.p3.schedule import Key, SendQueue
from lab.bench.p3.transport import ACK, PULL, PUSH, VALUE

# seconds to wait for a closed queue's thread to end. The threads are daemons: one still
# alive at interpreter exit is stopped where it stands, and inside torch that aborted the
# process after its last record ("terminate called without an active exception", 1 exit
# in 25 of a one-host run), so the process waits for them before it exits
JOIN_S = 10.0

Send = Callable[[int, int, int, int, Any], None]  # (dst, kind, key, step, payload)
Receive = Callable[[int, int, int, int, Any], None]  # (kind, key, step, src, payload)


class Trace:
    """Timestamps (``time.time()``) of the traced steps, written by any thread."""

    def __init__(self, steps: Sequence[int]) -> None:
        self.steps = set(steps)
        self.slices: dict[tuple[int, int], dict[str, float]] = {}
        self.layers: dict[tuple[int, int], dict[str, float]] = {}
        self.marks: dict[int, dict[str, float]] = {}
        self._lock = threading.Lock()

    def slice(self, step: int, key: int, what: str) -> None:
        if step in self.steps:
            with self._lock:
                self.slices.setdefault((step, key), {})[what] = time.time()

    def layer(self, step: int, layer: int, what: str, when: float | None = None) -> None:
        if step in self.steps:
            with self._lock:
                self.layers.setdefault((step, layer), {})[what] = when or time.time()

    def mark(self, step: int, what: str) -> None:
        if step in self.steps:
            with self._lock:
                self.marks.setdefault(step, {})[what] = time.time()


class Sender:
    """One thread taking messages from a queue and sending them one at a time."""

    def __init__(self, queue: SendQueue, send: Send, trace: Trace, name: str) -> None:
        self.queue, self._send, self.trace = queue, send, trace
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while (item := self.queue.get()) is not None:
                dst, kind, key, step, payload = item
                if kind == PUSH:
                    self.trace.slice(step, key, "push_start")
                self._send(dst, kind, key, step, payload)
                if kind == PUSH:
                    self.trace.slice(step, key, "push_sent")
                elif kind == PULL:
                    self.trace.slice(step, key, "pull_sent")
        except BaseException as e:
            self.error = e

    def join(self) -> None:
        """Wait for the thread to drain its closed queue and end."""
        self.thread.join(timeout=JOIN_S)


class Server:
    """The shard of rank ``rank``: the keys it owns, their values, and the pushes of the
    current step.

    A push or pull is handled in the thread that delivers it (the receiving thread of its
    peer, or the local worker's sender), under one lock: summing two slices takes
    microseconds, so a thread of the server's own would only add a hand-over per message
    and never hold a backlog to reorder. What leaves the server does queue, in its outbox,
    by priority under p3, and its sender sends one message at a time.

    No tensor is copied on the way through: a push's payload (a worker's gradient slice,
    or the Wire's buffer for that key) is kept until the key's update, which sums the
    pushes into a buffer of the key's own (``torch.add(..., out=)``). For a key in
    ``borrowed`` a remote push's payload is the Wire's receive buffer, lent for the call
    only (``Wire.lent_keys``; bigger payloads have buffers of their own): the
    update sums it at once where it completes the key (the usual case: the local worker's
    push needs no network and comes first), else it is copied into a buffer kept per key
    and worker. Values are sent from the shard's tensor itself, since no push of the next
    step, and so no update, can arrive before every worker has its value (see
    lab.bench.p3.transport.Wire). The shard's tensors may be the local worker's parameter
    slices: an update then is the local worker's new values, and its value message only
    says they are there.
    """

    def __init__(
        self,
        rank: int,
        keys: Sequence[Key],
        values: dict[int, Any],
        workers: int,
        lr: float,
        merged: bool,
        by_priority: bool,
        send: Callable[[int, int, int, int, Any], None],
        trace: Trace,
        borrowed: frozenset[int] = frozenset(),
    ) -> None:
        import torch

        self._add = torch.add
        self.rank, self.workers, self.lr, self.merged = rank, workers, lr, merged
        self.keys = {k.id: k for k in keys if k.server == rank}
        self.values = values  # key id -> flat tensor (this shard's copy)
        self.pushes: dict[int, list[Any]] = {k: [] for k in self.keys}
        self.sums = {k: v.new_empty(v.shape) for k, v in values.items()} if workers > 1 else {}
        self.borrowed = borrowed  # keys whose remote pushes are lent by the Wire
        self.kept: dict[tuple[int, int], Any] = {}  # (key, worker): a lent push held over
        self.trace = trace
        self._lock = threading.Lock()
        self.outbox: SendQueue = SendQueue(by_priority)
        self.sender = Sender(self.outbox, send, trace, f"server-{rank}-send")
        # this host's worker's receive: its answers are handed over, not queued
        self.local_worker: Receive | None = None

    def _answer(self, dst: int, kind: int, key: int, step: int, payload: Any, layer: int) -> None:
        if dst == self.rank and self.local_worker is not None:
            self.local_worker(kind, key, step, self.rank, payload)
        else:
            self.outbox.put((dst, kind, key, step, payload), layer)

    def receive(self, kind: int, key: int, step: int, src: int, payload: Any) -> None:
        """Handle one push or pull of ``key`` from worker ``src``."""
        layer = self.keys[key].layer
        if kind == PULL:
            self._answer(src, VALUE, key, step, self.values[key], layer)
            return
        with self._lock:
            pushes = self.pushes[key]
            if key in self.borrowed and src != self.rank and len(pushes) + 1 < self.workers:
                payload = self._keep(key, src, payload)
            pushes.append(payload)
            if len(pushes) < self.workers:
                return
            self.values[key].sub_(self._sum(key, pushes), alpha=self.lr)
            pushes.clear()
        self.trace.slice(step, key, "update")
        for w in range(self.workers):
            if self.merged:
                self._answer(w, VALUE, key, step, self.values[key], layer)
            else:
                self._answer(w, ACK, key, step, None, layer)

    def _keep(self, key: int, src: int, payload: Any) -> Any:
        """A copy of a lent push that must wait for the key's other pushes."""
        kept = self.kept.get((key, src))
        if kept is None:
            kept = self.kept[(key, src)] = payload.clone()
        else:
            kept.copy_(payload)
        return kept

    def _sum(self, key: int, pushes: list[Any]) -> Any:
        """The pushes' sum, added in arrival order (as one running sum would)."""
        if len(pushes) == 1:
            return pushes[0]
        total = self._add(pushes[0], pushes[1], out=self.sums[key])
        for p in pushes[2:]:
            total.add_(p)
        return total

    def close(self) -> None:
        """End the sending thread once its queue is drained (see JOIN_S)."""
        self.outbox.close()
        self.sender.join()


class Worker:
    """This host's training process's side of the parameter server.

    Args:
        rank: this host's rank.
        keys: the plan.
        flats: per tensor index, the flattened parameter (a view of ``param.data``).
        merged: values answer pushes (p3); else a pull follows each acknowledgement.
        by_priority: the send queue's discipline.
        send: sends one message (the transport, or a local server for local keys).
        trace: where timestamps go.
    """

    def __init__(
        self,
        rank: int,
        keys: Sequence[Key],
        flats: Sequence[Any],
        merged: bool,
        by_priority: bool,
        send: Send,
        trace: Trace,
    ) -> None:
        self.rank, self.keys, self.flats, self.merged = rank, list(keys), flats, merged
        self.trace = trace
        # each key's slice of its parameter: where its values go (a view, made once)
        self.views = [flats[k.tensor][k.start : k.stop] for k in self.keys]
        # per layer: the step whose values it holds (step + 1 once step's have all come)
        # and how many of its keys' values of the next step have come: the training loop
        # is woken once a layer is complete, not once per slice
        self.by_tensor: dict[int, list[Key]] = {}
        self.by_layer: dict[int, list[int]] = {}
        for k in self.keys:
            self.by_tensor.setdefault(k.tensor, []).append(k)
            self.by_layer.setdefault(k.layer, []).append(k.id)
        self.layer_version = dict.fromkeys(self.by_layer, 0)
        self.arrived = dict.fromkeys(self.by_layer, 0)
        self.cond = threading.Condition()
        self.queue: SendQueue = SendQueue(by_priority)
        self.sender = Sender(self.queue, send, trace, f"worker-{rank}-send")
        # this host's server shard's receive: pushes and pulls of its keys are handed over
        self.local_server: Receive | None = None

    def _send(self, k: Key, kind: int, step: int, payload: Any) -> None:
        """Queue a message for ``k``'s server, or hand it to this host's shard at once."""
        if k.server == self.rank and self.local_server is not None:
            if kind == PUSH:
                self.trace.slice(step, k.id, "push_start")
            self.local_server(kind, k.id, step, self.rank, payload)
            self.trace.slice(step, k.id, "push_sent" if kind == PUSH else "pull_sent")
        else:
            self.queue.put((k.server, kind, k.id, step, payload), k.layer)

    def gradient_ready(self, tensor: int, grad: Any, step: int) -> None:
        """Backprop produced ``grad`` of one tensor: queue its keys' pushes to other hosts'
        servers, all at once (the sender wakes once a tensor, not once a slice, and takes
        them by priority), then hand this host's shard its own."""
        flat = grad.reshape(-1)
        keys = self.by_tensor.get(tensor, ())
        for k in keys:
            self.trace.slice(step, k.id, "grad")
        remote = [k for k in keys if k.server != self.rank or self.local_server is None]
        if remote:
            items = [(k.server, PUSH, k.id, step, flat[k.start : k.stop]) for k in remote]
            self.queue.put_many(items, remote[0].layer)
        for k in keys:
            if k.server == self.rank and self.local_server is not None:
                self._send(k, PUSH, step, flat[k.start : k.stop])

    def receive(self, kind: int, key: int, step: int, src: int, payload: Any) -> None:
        k = self.keys[key]
        if kind == ACK:
            self.trace.slice(step, key, "ack")
            self._send(k, PULL, step, None)
            return
        view = self.views[key]
        if payload is not view:  # else the transport received it in place
            view.copy_(payload)
        self.trace.slice(step, key, "value")
        with self.cond:  # a layer's values of step s all come before any of step s + 1
            layer = k.layer
            self.arrived[layer] += 1
            if self.arrived[layer] == len(self.by_layer[layer]):
                self.arrived[layer] = 0
                self.layer_version[layer] = step + 1
                self.cond.notify_all()

    def wait_layer(self, layer: int, step: int, check: Callable[[], None]) -> None:
        """Block until every key of ``layer`` holds the values of ``step - 1``'s update."""
        with self.cond:
            while self.layer_version.get(layer, step) < step:  # (a layer without keys: none)
                self.cond.wait(timeout=1.0)
                check()

    def hold(self, step: int) -> None:
        """Say every layer holds the values ``step`` needs: another schedule's worker
        brought them into the same parameters (a run that alternates schedules)."""
        with self.cond:
            for layer in self.layer_version:
                self.layer_version[layer] = step
            self.cond.notify_all()

    def wait_all(self, step: int, check: Callable[[], None]) -> None:
        for layer in self.by_layer:
            self.wait_layer(layer, step, check)

    def close(self) -> None:
        """End the sending thread once its queue is drained (see JOIN_S)."""
        self.queue.close()
        self.sender.join()
