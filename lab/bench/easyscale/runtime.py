"""The EST loop: each process runs its ESTs in turn, then one sync and one optimizer step.

Per mini-batch and EST it prints an ``event`` record ``name="est"`` with the EST's loss as
its exact bit pattern (``loss_hex``, ``float.hex``) and where the time went (switch in,
compute, gradient copy, switch out); per mini-batch and process a ``step`` record with the
sync time. ``--system plain`` is the same work without ESTs (gradient accumulation over
the same mini-batches), the baseline of the per-step overhead.
"""

from __future__ import annotations

import time
from typing import Any

from lab.bench.easyscale import context as ctxmod
from lab.bench.easyscale import sync
from lab.bench.easyscale.config import Config, parse_level
from lab.bench.easyscale.workload import Cursor, SyntheticImages, build_model, next_batch
from lab.metrics.records import emit


def make_optimizer(params: list[Any], cfg: Config) -> Any:
    """SGD with momentum and weight decay, the per-parameter loop (same code everywhere):
    torch's SGD arithmetic without the import of its compiler stack (``optim.SGD``)."""
    from lab.bench.easyscale.optim import SGD

    return SGD(params, lr=cfg.lr, momentum=0.9, weight_decay=5e-4)


def job_model(cfg: Config) -> Any:
    """The model every worker starts from (same seed everywhere), in training mode."""
    ctxmod.seed_all(cfg.seed)
    return build_model(cfg).train()


def run_est(cfg: Config, rank: int) -> None:
    """Train this process's ESTs for ``cfg.steps`` mini-batches; checkpoint if asked."""
    import torch
    import torch.distributed as dist

    d1, _ = parse_level(cfg.level)
    model = job_model(cfg)
    params = list(model.parameters())
    opt = make_optimizer(params, cfg)
    data = SyntheticImages(cfg)
    mine = cfg.ests_of(rank)
    counts = cfg.counts()
    if cfg.resume:
        first = ctxmod.load_shared(cfg.resume, model, opt, cfg.ests)
        contexts = [ctxmod.load_context(cfg.resume, i) for i in mine]
    else:
        first = cfg.start_step
        contexts = [ctxmod.fresh_context(i, cfg.seed, model) for i in mine]
    if not cfg.switch:
        contexts[0].restore(model)
    done = first + cfg.steps
    for step in range(first, first + cfg.steps):
        began = time.perf_counter()
        grads = []
        for ctx in contexts:
            t0 = time.perf_counter()
            if cfg.switch:
                ctx.restore(model)
            t1 = time.perf_counter()
            x, y = next_batch(data, cfg, ctx.index, ctx.cursor)
            for p in params:
                p.grad = None
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            t2 = time.perf_counter()
            ctx.keep_grad(params)
            t3 = time.perf_counter()
            if cfg.switch:
                ctx.capture(model)
            t4 = time.perf_counter()
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
                switch_in=t1 - t0,
                compute=t2 - t1,
                grad_copy=t3 - t2,
                switch_out=t4 - t3,
            )
        t5 = time.perf_counter()
        reduce = sync.gather_canonical if d1 else sync.reduce_vanilla
        total = reduce(grads, counts if d1 else cfg.ests)
        sync.scatter_into(total, params)
        opt.step()
        t6 = time.perf_counter()
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
        if cfg.stop_file and sync.agreed_stop(cfg.stop_file):
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


def run_plain(cfg: Config, rank: int) -> None:
    """The same mini-batches as ``ests`` ESTs on one process, by gradient accumulation."""
    import torch

    model = job_model(cfg)
    params = list(model.parameters())
    opt = make_optimizer(params, cfg)
    data = SyntheticImages(cfg)
    ctxmod.seed_all(ctxmod.worker_seed(cfg.seed, 0))
    cursors = [Cursor() for _ in range(cfg.ests)]
    for step in range(cfg.start_step, cfg.start_step + cfg.steps):
        began = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for worker, cursor in enumerate(cursors):
            x, y = next_batch(data, cfg, worker, cursor)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
        for p in params:
            p.grad /= cfg.ests
        opt.step()
        emit(
            "step",
            rank=rank,
            step=step,
            samples=cfg.ests * cfg.batch_size,
            seconds=time.perf_counter() - began,
            loss=float(loss.detach()),
            ests=cfg.ests,
        )
