"""Gradient aggregation: the canonical EST-index-order sum, and the engines' own.

gloo's ``all_reduce(SUM)`` over 4 CPU ranks splits the buffer into chunks that travel a
ring, so which partial sums meet first depends on the number of ranks; float addition is
not associative, so its result changes with the placement. The canonical sum instead
gathers every logical worker's gradient (an ``all_gather`` moves bits, it adds nothing)
and every process adds them in the same order: ``((g0/N + g1/N) + g2/N) + ...``. The DDP
communication hook below does the same per bucket, so DDP with N ranks and N ESTs on any
placement compute the same bits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def canonical_sum(grads: Sequence[Any], n: int) -> Any:
    """``sum(g / n for g in grads)``, left to right: the one order every placement uses."""
    acc = grads[0] / n
    for g in grads[1:]:
        acc += g / n
    return acc


def gather_canonical(local: Sequence[Any], counts: Sequence[int]) -> Any:
    """All ESTs' flat gradients from every process, summed in EST-index order.

    Args:
        local: this process's EST gradients, in EST-index order.
        counts: ESTs per process, in rank order (the placement).
    """
    import torch
    import torch.distributed as dist

    send = torch.zeros(max(counts), local[0].numel(), dtype=local[0].dtype, device=local[0].device)
    for j, g in enumerate(local):
        send[j].copy_(g)
    if dist.is_initialized() and dist.get_world_size() > 1:
        parts = [torch.empty_like(send) for _ in counts]
        dist.all_gather(parts, send)
    else:
        parts = [send]
    ordered = [parts[p][j] for p, c in enumerate(counts) for j in range(c)]
    return canonical_sum(ordered, len(ordered))


def reduce_vanilla(local: Sequence[Any], n: int) -> Any:
    """D0: add this process's ESTs, then gloo's all_reduce (order follows the placement)."""
    import torch.distributed as dist

    acc = local[0].clone()
    for g in local[1:]:
        acc += g
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(acc)
    return acc / n


def scatter_into(flat: Any, params: Sequence[Any]) -> None:
    """Write a flat gradient back into ``param.grad`` (new tensors, exact copies)."""
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset : offset + n].view_as(p).clone()
        offset += n


def canonical_hook(state, bucket):  # type: ignore[no-untyped-def]
    """DDP communication hook: the bucket's mean in rank order, bit-identical to ESTs'.

    Unannotated on purpose: DDP rejects a hook whose annotations are not its own types,
    and under ``from __future__ import annotations`` every annotation is a string.
    """
    import torch
    import torch.distributed as dist

    buf = bucket.buffer()
    parts = [torch.empty_like(buf) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, buf)
    fut: Any = torch.futures.Future()
    fut.set_result(canonical_sum(parts, len(parts)))
    return fut


def params_digest(params: Iterable[Any]) -> str:
    """A short hash of the parameters' bits: two workers agree on it only if every bit does."""
    import hashlib

    h = hashlib.sha1()
    for p in params:
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def agreed_stop(path: str, device: Any = None) -> bool:
    """Whether ``path`` exists on any process, agreed by all (one MAX all-reduce of one
    number on the rank's device, as NCCL needs), so every process ends at the same step
    and the checkpoint is consistent."""
    import os

    import torch
    import torch.distributed as dist

    flag = torch.tensor([1.0 if os.path.exists(path) else 0.0], device=device)
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item() > 0)
