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
from lab.bench.easyscale.runtime import job_model, loss_of, make_optimizer
from lab.bench.easyscale.workload import Cursor, SyntheticImages, next_batch
from lab.metrics.records import emit


def run_ddp(cfg: Config, rank: int, device: Any = None) -> None:
    """Train ``cfg.steps`` mini-batches as DDP rank ``rank`` of ``cfg.ests``."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    device = torch.device("cpu") if device is None else device
    model = job_model(cfg, device)
    criterion = loss_of(cfg, device)
    opt = make_optimizer(list(model.parameters()), cfg)
    ids = [device.index] if device.type == "cuda" else None
    net = DistributedDataParallel(model, device_ids=ids, broadcast_buffers=False)
    if cfg.reduce == "canonical":
        net.register_comm_hook(None, sync.canonical_hook)
    data = SyntheticImages(cfg)
    ctxmod.seed_all(ctxmod.worker_seed(cfg.seed, rank))
    cursor = Cursor()
    for step in range(cfg.start_step, cfg.start_step + cfg.steps):
        began = clock(device)
        x, y = next_batch(data, cfg, rank, cursor)
        x, y = x.to(device), y.to(device)
        opt.zero_grad(set_to_none=True)
        t1 = clock(device)
        loss = criterion(net(x), y)
        loss.backward()
        opt.step()
        end = clock(device)
        value = float(loss.detach())
        emit(
            "event",
            name="est",
            rank=rank,
            est=rank,
            step=step,
            loss=value,
            loss_hex=value.hex(),
            seconds=end - began,
            compute=end - t1,
        )
        digest = {"params_digest": sync.params_digest(model.parameters())} if cfg.digest else {}
        emit(
            "step",
            rank=rank,
            step=step,
            samples=cfg.batch_size,
            seconds=end - began,
            ests=1,
            **digest,
        )
