"""The baselines: PyTorch DDP on gloo, one logical worker per rank.

``reduce="vanilla"`` is DDP as shipped (gloo's ring all-reduce: its summation order depends
on the number of ranks); ``reduce="canonical"`` registers a communication hook that sums
the ranks' gradients in rank order (``sync.canonical_hook``), the reference ESTs at D1 must
equal bit for bit. Buffers are not broadcast from rank 0, so each rank keeps its own
BatchNorm statistics as each EST does. On ``--device cuda`` DDP holds the rank's GPU
(``device_ids``) and the hook's ``all_gather`` runs on NCCL.
"""

from __future__ import annotations

from typing import Any

from lab.bench.easyscale import context as ctxmod
from lab.bench.easyscale import sync
from lab.bench.easyscale.config import Config
from lab.bench.easyscale.device import clock
from lab.bench.easyscale.job import job_model, loss_of, make_optimizer
from lab.bench.easyscale.workload import Cursor, SyntheticImages, next_batch
from lab.metrics.records import emit


class DDPStepper:
    """One DDP rank's training steps, one call each: ``run_ddp``'s loop, and the DDP steps
    a one-process EST run times between its own (``Config.ddp_beside``, Fig 13: an EST
    against a DDP step in the same process, whose speed varied ±20% between launches)."""

    def __init__(self, cfg: Config, rank: int, device: Any = None) -> None:
        import torch
        from torch.nn.parallel import DistributedDataParallel

        self.cfg, self.rank = cfg, rank
        self.device = torch.device("cpu") if device is None else device
        self.model = job_model(cfg, self.device)
        self.criterion = loss_of(cfg, self.device)
        self.opt = make_optimizer(list(self.model.parameters()), cfg)
        ids = [self.device.index] if self.device.type == "cuda" else None
        self.net = DistributedDataParallel(self.model, device_ids=ids, broadcast_buffers=False)
        if cfg.reduce == "canonical":
            self.net.register_comm_hook(None, sync.canonical_hook)
        self.data = SyntheticImages(cfg)
        ctxmod.seed_all(ctxmod.worker_seed(cfg.seed, rank))
        self.cursor = Cursor()

    def step(self) -> tuple[float, float, float]:
        """One mini-batch: (seconds, of which forward, backward and update, loss)."""
        began = clock(self.device)
        x, y = next_batch(self.data, self.cfg, self.rank, self.cursor)
        x, y = x.to(self.device), y.to(self.device)
        self.opt.zero_grad(set_to_none=True)
        t1 = clock(self.device)
        loss = self.criterion(self.net(x), y)
        loss.backward()
        self.opt.step()
        end = clock(self.device)
        return end - began, end - t1, float(loss.detach())


def run_ddp(cfg: Config, rank: int, device: Any = None) -> None:
    """Train ``cfg.steps`` mini-batches as DDP rank ``rank`` of ``cfg.ests``."""
    ddp = DDPStepper(cfg, rank, device)
    for step in range(cfg.start_step, cfg.start_step + cfg.steps):
        seconds, compute, value = ddp.step()
        emit(
            "event",
            name="est",
            rank=rank,
            est=rank,
            step=step,
            loss=value,
            loss_hex=value.hex(),
            seconds=seconds,
            compute=compute,
        )
        digest = {"params_digest": sync.params_digest(ddp.model.parameters())} if cfg.digest else {}
        emit(
            "step",
            rank=rank,
            step=step,
            samples=cfg.batch_size,
            seconds=seconds,
            ests=1,
            **digest,
        )
