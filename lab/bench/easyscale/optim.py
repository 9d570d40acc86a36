"""SGD with momentum and weight decay: torch's own arithmetic without ``torch.optim``'s class.

``torch.optim.Optimizer`` imports torch's compiler stack (``torch._dynamo``) the first time
a parameter group is added, about 2 s of CPU in every rank, more than importing torch
itself; an EasyScale stage is a few mini-batches, so that import was most of a smoke run.
This class keeps the momentum buffers and calls ``torch.optim.sgd.sgd``, the functional
form that ``torch.optim.SGD.step`` calls, with the per-parameter loop (``foreach=False``):
the same operations in the same order, so its bits are ``torch.optim.SGD``'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class SGD:
    """Momentum SGD over a fixed list of parameters (no parameter groups, no closures)."""

    def __init__(
        self, params: Iterable[Any], lr: float, momentum: float = 0.0, weight_decay: float = 0.0
    ) -> None:
        self.params = list(params)
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.buffers: list[Any] = [None] * len(self.params)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def step(self) -> None:
        """One update of every parameter that has a gradient."""
        import torch
        from torch.optim.sgd import sgd

        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        bufs = [self.buffers[i] for i in live]
        with torch.no_grad():
            sgd(
                [self.params[i] for i in live],
                [self.params[i].grad for i in live],
                bufs,
                foreach=False,
                fused=False,
                weight_decay=self.weight_decay,
                momentum=self.momentum,
                lr=self.lr,
                dampening=0.0,
                nesterov=False,
                maximize=False,
            )
        for i, buf in zip(live, bufs, strict=True):
            self.buffers[i] = buf

    def state_dict(self) -> dict[str, Any]:
        return {"lr": self.lr, "momentum_buffers": list(self.buffers)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        buffers = list(state["momentum_buffers"])
        if len(buffers) != len(self.params):
            raise ValueError(f"{len(buffers)} momentum buffers for {len(self.params)} parameters")
        self.buffers = [
            None if b is None else b.to(p.device) for b, p in zip(buffers, self.params, strict=True)
        ]
