"""One EST's context: what is switched in before its mini-batch and out after it.

An EST owns the global RNG states (torch, NumPy, Python, and the current GPU's when CUDA is
in use: dropout on a GPU draws from it), the model's buffers (BatchNorm
running statistics and counters), its sampler cursor, and its gradient, which is copied
out of ``param.grad`` after its backward pass and kept until the sync. Parameters and the
optimizer state are the job's, shared by all ESTs. Checkpoints hold each EST's context in
its own file, so a restart with another placement loads exactly the ESTs each process now
holds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.bench.easyscale.rng import RNGState
from lab.bench.easyscale.workload import Cursor

SHARED_FILE = "shared.pt"


def worker_seed(seed: int, worker: int) -> int:
    """The RNG seed of logical worker ``worker``: DDP rank i and EST i use the same one."""
    return seed * 1000 + worker


def seed_all(seed: int) -> None:
    import numpy as np
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


class LiveBuffers:
    """A model's buffers (BatchNorm statistics and counters), listed once and grouped by
    (dtype, device), the switch's view of the model.

    torch fuses a multi-tensor copy only over lists of one dtype and device. ResNet50's 159
    buffers mix float32 statistics with int64 counters, and as one list each buffer became
    its own copy: 321 ``cudaMemcpyAsync`` per EST micro-batch, ~2.2 ms of CPU per switch in
    and as much out on an H200 (a launch per buffer before that: ~7 ms). BatchNorm updates
    its buffers in place, so the tensors a model holds stay the same for a whole run:
    walking the model's modules for them at every switch (``named_buffers``, out and in)
    and grouping them again took ~40 µs of a ~70 µs switch on the smoke model. Build it
    after the model is on its device.
    """

    def __init__(self, model: Any) -> None:
        named = list(model.named_buffers())
        self.names = [n for n, _ in named]
        self.tensors = [t for _, t in named]
        by_kind: dict[tuple[Any, Any], list[int]] = {}
        for i, t in enumerate(self.tensors):
            by_kind.setdefault((t.dtype, t.device), []).append(i)
        self.groups = list(by_kind.values())
        self.grouped = [[self.tensors[i] for i in g] for g in self.groups]


@dataclass
class ESTContext:
    """The state of one logical worker while it is switched out."""

    index: int
    rng: RNGState = field(default_factory=RNGState)
    buffers: dict[str, Any] = field(default_factory=dict)
    cursor: Cursor = field(default_factory=Cursor)
    grad: Any = None
    # ``buffers`` in ``LiveBuffers.grouped``'s order, for the LiveBuffers they match
    _kept: list[list[Any]] = field(default_factory=list, repr=False)
    _kept_for: LiveBuffers | None = field(default=None, repr=False)

    def capture(self, live: LiveBuffers) -> None:
        """Switch out: keep the global RNG states and the model's buffers (copied into the
        tensors this EST already holds, after its first switch)."""
        self.rng.capture()
        if self._matches(live):
            _copy_groups(self._kept, live.grouped)
            return
        self.buffers = {
            n: t.detach().clone() for n, t in zip(live.names, live.tensors, strict=True)
        }
        self._group(live)

    def restore(self, live: LiveBuffers) -> None:
        """Switch in: put this EST's RNG states and buffers in place."""
        self.rng.restore()
        if not self._matches(live):
            if not _same_devices(self.buffers, live):  # loaded from a checkpoint onto the CPU
                self.buffers = {
                    n: self.buffers[n].to(t.device)
                    for n, t in zip(live.names, live.tensors, strict=True)
                }
            self._group(live)
        _copy_groups(live.grouped, self._kept)

    def _matches(self, live: LiveBuffers) -> bool:
        return self._kept_for is live

    def _group(self, live: LiveBuffers) -> None:
        self._kept = [[self.buffers[live.names[i]] for i in g] for g in live.groups]
        self._kept_for = live

    def keep_grad(self, params: list[Any]) -> None:
        """Copy the gradient of this EST's mini-batch out of ``param.grad`` (one flat tensor)."""
        import torch

        flat = torch.cat([p.grad.reshape(-1) for p in params])
        self.grad = flat if self.grad is None else self.grad.copy_(flat)

    def to_file(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "rng": self.rng.to_dict(),
            "buffers": self.buffers,
            "cursor": (self.cursor.epoch, self.cursor.offset),
        }


def _copy_groups(targets: list[list[Any]], sources: list[list[Any]]) -> None:
    """``targets[g] <- sources[g]`` for lists already grouped by (dtype, device)."""
    import torch

    with torch.no_grad():
        for group_targets, group_sources in zip(targets, sources, strict=True):
            torch._foreach_copy_(group_targets, group_sources)


def _same_devices(kept: dict[str, Any], live: LiveBuffers) -> bool:
    return all(kept[n].device == t.device for n, t in zip(live.names, live.tensors, strict=True))


def fresh_context(index: int, seed: int, live: LiveBuffers) -> ESTContext:
    """A new EST: seeded as DDP rank ``index`` would be, with the model's initial buffers."""
    seed_all(worker_seed(seed, index))
    ctx = ESTContext(index)
    ctx.capture(live)
    return ctx


def est_path(directory: str | Path, index: int) -> Path:
    return Path(directory) / f"est-{index}.pt"


def save_contexts(directory: str | Path, contexts: list[ESTContext]) -> None:
    import torch

    Path(directory).mkdir(parents=True, exist_ok=True)
    for ctx in contexts:
        torch.save(ctx.to_file(), est_path(directory, ctx.index))


def load_context(directory: str | Path, index: int) -> ESTContext:
    import torch

    path = est_path(directory, index)
    if not path.is_file():
        raise FileNotFoundError(f"no EST {index} in checkpoint {directory}")
    data = torch.load(path, map_location="cpu", weights_only=False)  # RNG states stay on the CPU
    epoch, offset = data["cursor"]
    rng = RNGState.from_dict(data["rng"])
    return ESTContext(index, rng, data["buffers"], Cursor(epoch, offset))


def save_shared(directory: str | Path, model: Any, optimizer: Any, step: int, ests: int) -> None:
    """Parameters, optimizer state and the next step (written by process 0)."""
    import torch

    Path(directory).mkdir(parents=True, exist_ok=True)
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
    torch.save({**state, "step": step, "ests": ests}, Path(directory) / SHARED_FILE)


def load_shared(directory: str | Path, model: Any, optimizer: Any, ests: int) -> int:
    """Load parameters and optimizer state; returns the step to continue from."""
    import torch

    path = Path(directory) / SHARED_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {directory}")
    data = torch.load(path, map_location="cpu", weights_only=False)
    if int(data["ests"]) != ests:
        raise ValueError(f"checkpoint {directory} has {data['ests']} ESTs, not {ests}")
    model.load_state_dict(data["model"])
    optimizer.load_state_dict(data["optimizer"])
    return int(data["step"])
