"""The EST loop: each process runs its ESTs in turn, then one sync and one optimizer step.

Per mini-batch and EST it prints an ``event`` record ``name="est"`` with the EST's loss as
its exact bit pattern (``loss_hex``, ``float.hex``) and where the time went (switch in,
compute, gradient copy, switch out), with the process's CPU time over the same mini-batch
(``cpu_seconds``: the length of its work, which other jobs on a shared machine do not
stretch as they stretch its wall time); per mini-batch and process a ``step`` record with the
sync time. ``--system plain`` is the same work without ESTs (gradient accumulation over
the same mini-batches), the baseline of the per-step overhead. The same code runs on the CPU
and on a GPU: batches are drawn on the CPU (the same bits whatever the device) and moved to
the rank's device; timers wait for the GPU (``device.clock``). With ``ddp_beside`` each
step is followed by a one-rank DDP step, printed as an ``event`` named ``ddp_step``.
"""

from __future__ import annotations

import time
from typing import Any

from lab.bench.easyscale import context as ctxmod
from lab.bench.easyscale import sync
from lab.bench.easyscale.config import Config, parse_level
from lab.bench.easyscale.device import clock
from lab.bench.easyscale.job import job_model, loss_of, make_optimizer
from lab.bench.easyscale.workload import Cursor, SyntheticImages, next_batch
from lab.metrics.records import emit


def run_est(cfg: Config, rank: int, device: Any = None) -> None:
    """Train this process's ESTs for ``cfg.steps`` mini-batches; checkpoint if asked."""
    import torch
    import torch.distributed as dist

    device = torch.device("cpu") if device is None else device
    d1, _ = parse_level(cfg.level)
    model = job_model(cfg, device)
    criterion = loss_of(cfg, device)
    params = list(model.parameters())
    opt = make_optimizer(params, cfg)
    data = SyntheticImages(cfg)
    mine = cfg.ests_of(rank)
    counts = cfg.counts()
    first = ctxmod.load_shared(cfg.resume, model, opt, cfg.ests) if cfg.resume else cfg.start_step
    live = ctxmod.LiveBuffers(model)  # after the load: what the switches copy in and out
    if cfg.resume:
        contexts = [ctxmod.load_context(cfg.resume, i) for i in mine]
    else:
        contexts = [ctxmod.fresh_context(i, cfg.seed, live) for i in mine]
    if not cfg.switch:
        contexts[0].restore(live)
    beside = None
    if cfg.ddp_beside:
        from lab.bench.easyscale.ddp import DDPStepper

        beside = DDPStepper(cfg, rank, device)
    done = first + cfg.steps
    for step in range(first, first + cfg.steps):
        began = clock(device)
        grads = []
        for ctx in contexts:
            c0 = time.process_time()
            t0 = clock(device)
            if cfg.switch:
                ctx.restore(live)
            t1 = clock(device)
            x, y = next_batch(data, cfg, ctx.index, ctx.cursor)
            x, y = x.to(device), y.to(device)
            for p in params:
                p.grad = None
            loss = criterion(model(x), y)
            loss.backward()
            t2 = clock(device)
            ctx.keep_grad(params)
            t3 = clock(device)
            if cfg.switch:
                ctx.capture(live)
            t4 = clock(device)
            c4 = time.process_time()
            grads.append(ctx.grad)
            value = float(loss.detach())
            emit(
                "event",
                name="est",
                rank=rank,
                est=ctx.index,
                step=step,
                loss=value,
                loss_hex=value.hex(),
                seconds=t4 - t0,
                cpu_seconds=c4 - c0,
                switch_in=t1 - t0,
                compute=t2 - t1,
                grad_copy=t3 - t2,
                switch_out=t4 - t3,
            )
        t5 = clock(device)
        reduce = sync.gather_canonical if d1 else sync.reduce_vanilla
        total = reduce(grads, counts if d1 else cfg.ests)
        sync.scatter_into(total, params)
        opt.step()
        t6 = clock(device)
        digest = {"params_digest": sync.params_digest(params)} if cfg.digest else {}
        emit(
            "step",
            rank=rank,
            step=step,
            samples=len(contexts) * cfg.batch_size,
            seconds=t6 - began,
            sync_seconds=t6 - t5,
            ests=len(contexts),
            **digest,
        )
        if beside is not None:  # after the step record: the EST step's time is its own
            seconds, compute, value = beside.step()
            emit("event", name="ddp_step", rank=rank, step=step, seconds=seconds,
                 compute=compute, loss=value)  # fmt: skip
        if cfg.stop_file and sync.agreed_stop(cfg.stop_file, device):
            done = step + 1
            emit("event", name="stop", rank=rank, step=done)
            break
    if cfg.save:
        if rank == 0:
            ctxmod.save_shared(cfg.save, model, opt, done, cfg.ests)
        ctxmod.save_contexts(cfg.save, contexts)
        if dist.is_initialized():
            dist.barrier()
        emit("event", name="checkpoint", rank=rank, path=cfg.save, step=done)


def run_plain(cfg: Config, rank: int, device: Any = None) -> None:
    """The same mini-batches as ``ests`` ESTs on one process, by gradient accumulation."""
    import torch

    device = torch.device("cpu") if device is None else device
    model = job_model(cfg, device)
    criterion = loss_of(cfg, device)
    params = list(model.parameters())
    opt = make_optimizer(params, cfg)
    data = SyntheticImages(cfg)
    ctxmod.seed_all(ctxmod.worker_seed(cfg.seed, 0))
    cursors = [Cursor() for _ in range(cfg.ests)]
    for step in range(cfg.start_step, cfg.start_step + cfg.steps):
        began = clock(device)
        opt.zero_grad(set_to_none=True)
        for worker, cursor in enumerate(cursors):
            x, y = next_batch(data, cfg, worker, cursor)
            x, y = x.to(device), y.to(device)
            loss = criterion(model(x), y)
            loss.backward()
        for p in params:
            p.grad /= cfg.ests
        opt.step()
        emit(
            "step",
            rank=rank,
            step=step,
            samples=cfg.ests * cfg.batch_size,
            seconds=clock(device) - began,
            loss=float(loss.detach()),
            ests=cfg.ests,
        )
