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


@dataclass
class ESTContext:
    """The state of one logical worker while it is switched out."""

    index: int
    rng: dict[str, Any] = field(default_factory=dict)
    buffers: dict[str, Any] = field(default_factory=dict)
    cursor: Cursor = field(default_factory=Cursor)
    grad: Any = None

    def capture(self, model: Any) -> None:
        """Switch out: keep the global RNG states and the model's buffers."""
        import numpy as np
        import torch

        self.rng = {
            "torch": torch.get_rng_state(),
            "numpy": np.random.get_state(),
            "python": random.getstate(),
        }
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            self.rng["cuda"] = torch.cuda.get_rng_state()
        live = dict(model.named_buffers())
        if self.buffers.keys() == live.keys() and _same_devices(self.buffers, live):
            copy_buffers(list(self.buffers.values()), list(live.values()))
        else:
            self.buffers = {k: v.detach().clone() for k, v in live.items()}

    def restore(self, model: Any) -> None:
        """Switch in: put this EST's RNG states and buffers in place."""
        import numpy as np
        import torch

        torch.set_rng_state(self.rng["torch"])
        np.random.set_state(self.rng["numpy"])
        random.setstate(self.rng["python"])
        if "cuda" in self.rng:
            torch.cuda.set_rng_state(self.rng["cuda"])
        live = dict(model.named_buffers())
        if not _same_devices(self.buffers, live):  # loaded from a checkpoint onto the CPU
            self.buffers = {k: self.buffers[k].to(v.device) for k, v in live.items()}
        copy_buffers(list(live.values()), [self.buffers[k] for k in live])

    def keep_grad(self, params: list[Any]) -> None:
        """Copy the gradient of this EST's mini-batch out of ``param.grad`` (one flat tensor)."""
        import torch

        flat = torch.cat([p.grad.reshape(-1) for p in params])
        self.grad = flat if self.grad is None else self.grad.copy_(flat)

    def to_file(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "rng": self.rng,
            "buffers": self.buffers,
            "cursor": (self.cursor.epoch, self.cursor.offset),
        }


def copy_buffers(targets: list[Any], sources: list[Any]) -> None:
    """``targets[i] <- sources[i]``, one multi-tensor copy per (dtype, device).

    torch fuses a multi-tensor copy only over lists of one dtype and device. ResNet50's
    159 buffers mix float32 statistics with int64 counters, and as one list each buffer
    became its own copy: 321 ``cudaMemcpyAsync`` per EST micro-batch, ~2.2 ms of CPU per
    switch in and as much out on an H200 (a launch per buffer before that: ~7 ms)."""
    import torch

    groups: dict[tuple[Any, Any], tuple[list[Any], list[Any]]] = {}
    for target, source in zip(targets, sources, strict=True):
        group = groups.setdefault((target.dtype, target.device), ([], []))
        group[0].append(target)
        group[1].append(source)
    with torch.no_grad():
        for group_targets, group_sources in groups.values():
            torch._foreach_copy_(group_targets, group_sources)


def _same_devices(kept: dict[str, Any], live: dict[str, Any]) -> bool:
    return all(kept[k].device == v.device for k, v in live.items())


def fresh_context(index: int, seed: int, model: Any) -> ESTContext:
    """A new EST: seeded as DDP rank ``index`` would be, with the model's initial buffers."""
    seed_all(worker_seed(seed, index))
    ctx = ESTContext(index)
    ctx.capture(model)
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
    return ESTContext(index, data["rng"], data["buffers"], Cursor(epoch, offset))


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
