"""P3's pure scheduling logic: how tensors become keys, where keys live, in which order
they travel.

Nothing here touches torch or a socket, so the rules are tested on their own:

- ``plan_keys`` cuts a model's tensors into the keys the parameter server synchronises.
  ``baseline`` follows stock MXNet KVStore (``src/kvstore/kvstore_dist.h``,
  ``EncodeDefaultKey``): a tensor below ``big_bound`` (1,000,000 elements) is one key on
  server ``(key * 9973) % servers``; a bigger one is split into one part per server.
  ``slicing`` and ``p3`` follow P3's fork of that function: tensors of at least
  ``slice_elements`` are cut into slices of ``slice_elements``, slice ``i`` on server
  ``i % servers`` (round-robin); smaller tensors stay whole, placed as in MXNet.
- a key's priority is its layer's position from the *input* (0 = first layer, sent
  first): the next forward pass needs that layer first, although backprop makes it last.
- ``SendQueue`` hands out keys FIFO (baseline, slicing) or highest priority first (p3),
  FIFO among equal priorities.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from lab.errors import ParameterError

SCHEDULES = ("baseline", "slicing", "p3")
MXNET_BIGARRAY_BOUND = 1_000_000  # stock MXNet's MXNET_KVSTORE_BIGARRAY_BOUND default
P3_SLICE_ELEMENTS = 40_000  # P3's fork's default (the paper's text says 50,000)
_HASH = 9973  # MXNet's placement multiplier for keys that live on one server


@dataclass(frozen=True)
class Tensor:
    """One parameter tensor as the scheduler sees it.

    Args:
        name: the parameter's name (``features.0.weight``).
        numel: its number of elements.
        layer: its layer's position from the input (0 = first).
    """

    name: str
    numel: int
    layer: int


@dataclass(frozen=True)
class Key:
    """One unit the parameter server synchronises: a whole tensor, a part or a slice.

    Args:
        id: position in the plan (also the wire tag's base).
        tensor: index of the tensor in the model's parameter list.
        start, stop: the element range of the flattened tensor.
        server: the rank of the server shard that owns it.
        layer: its layer's position from the input; the priority (lower goes first).
    """

    id: int
    tensor: int
    start: int
    stop: int
    server: int
    layer: int

    @property
    def numel(self) -> int:
        return self.stop - self.start


def check_schedule(schedule: str) -> str:
    if schedule not in SCHEDULES:
        raise ParameterError("schedule", schedule, ", ".join(SCHEDULES))
    return schedule


def check_slice_elements(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParameterError("slice_elements", value, "an integer >= 1")
    return value


def check_servers(servers: object, hosts: int) -> int:
    """Servers are placed one per host, so there can be no more servers than hosts."""
    if isinstance(servers, bool) or not isinstance(servers, int) or not 1 <= servers <= hosts:
        raise ParameterError("servers", servers, f"an integer from 1 to the {hosts} host(s)")
    return servers


def even_parts(numel: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ranges of nearly equal size covering ``range(numel)``."""
    bounds = [round(numel * i / parts) for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(parts) if bounds[i + 1] > bounds[i]]


def slices(numel: int, size: int) -> list[tuple[int, int]]:
    """Ranges of ``size`` elements (the last one shorter) covering ``range(numel)``."""
    return [(a, min(a + size, numel)) for a in range(0, numel, size)]


def plan_keys(
    tensors: Sequence[Tensor],
    schedule: str,
    servers: int,
    slice_elements: int = P3_SLICE_ELEMENTS,
    big_bound: int = MXNET_BIGARRAY_BOUND,
) -> list[Key]:
    """The keys of a model under ``schedule``, in parameter order.

    Args:
        tensors: the model's parameters in registration order.
        schedule: ``baseline``, ``slicing`` or ``p3``.
        servers: the number of server shards (ranks 0..servers-1 hold them).
        slice_elements: the slice size of ``slicing`` and ``p3``.
        big_bound: the size from which ``baseline`` splits a tensor over all servers.
    """
    check_schedule(schedule)
    check_slice_elements(slice_elements)
    if servers < 1:
        raise ParameterError("servers", servers, "an integer >= 1")
    keys: list[Key] = []
    for t_index, t in enumerate(tensors):
        if schedule == "baseline":
            if t.numel < big_bound:
                ranges = [((0, t.numel), (t_index * _HASH) % servers)]
            else:
                ranges = [(r, i) for i, r in enumerate(even_parts(t.numel, servers))]
        elif t.numel < slice_elements:
            ranges = [((0, t.numel), (t_index * _HASH) % servers)]
        else:
            ranges = [(r, i % servers) for i, r in enumerate(slices(t.numel, slice_elements))]
        for (start, stop), server in ranges:
            keys.append(Key(len(keys), t_index, start, stop, server, t.layer))
    return keys


T = TypeVar("T")


class SendQueue(Generic[T]):
    """A thread-safe queue of items with a priority: FIFO, or lowest priority value first.

    ``get`` blocks until an item is there or the queue is closed (then it returns None).
    A put rings a C-level doorbell (``queue.SimpleQueue``, one token per item and one on
    close) and the heap sits behind a plain lock: a getter sleeps in C rather than in
    ``threading.Condition``'s Python, which P3 pays once per slice per hop.
    """

    def __init__(self, by_priority: bool) -> None:
        self.by_priority = by_priority
        self._heap: list[tuple[int, int, T]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._bell: queue.SimpleQueue[bool] = queue.SimpleQueue()

    def put(self, item: T, priority: int = 0) -> None:
        self.put_many((item,), priority)

    def put_many(self, items: Sequence[T], priority: int = 0) -> None:
        """Queue each of ``items`` (all of one priority) under one lock: a getter sees
        all of them or none."""
        order = priority if self.by_priority else 0
        with self._lock:
            for item in items:
                heapq.heappush(self._heap, (order, next(self._seq), item))
        for _ in items:
            self._bell.put(True)

    def get(self) -> T | None:
        self._bell.get()
        with self._lock:
            if self._heap:
                return heapq.heappop(self._heap)[2]
        self._bell.put(False)  # the close token: closed and drained, so wake the next getter
        return None

    def close(self) -> None:
        self._bell.put(False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._heap)
