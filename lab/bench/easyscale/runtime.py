"""The EST loop: each process runs its ESTs in turn, then one sync and one optimizer step.

Per mini-batch and EST it prints an ``event`` record ``name="est"`` with the EST's loss as
its exact bit pattern (``loss_hex``, ``float.hex``) and where the time went (switch in,
compute, gradient copy, switch out); per mini-batch and process a ``step`` record with the
sync time. ``--system plain`` is the same work without ESTs (gradient accumulation over
the same mini-batches), the baseline of the per-step overhead. The same code runs on the CPU
and on a GPU: batches are drawn on the CPU (the same bits whatever the device) and moved to
the rank's device; timers wait for the GPU (``device.clock``). With ``ddp_beside`` each
step is followed by a one-rank DDP step, printed as an ``event`` named ``ddp_step``.
"""

from __future__ import annotations

from typing import Any

from lab.bench.easyscale import context as ctxmod
from lab.bench.easyscale import cuda_d1, sync
from lab.bench.easyscale.config import Config, parse_level
from lab.bench.easyscale.device import clock
from lab.bench.easyscale.workload import Cursor, SyntheticImages, build_model, next_batch
from lab.metrics.records import emit


def make_optimizer(params: list[Any], cfg: Config) -> Any:
    """SGD with momentum and weight decay, the per-parameter loop (same code everywhere):
    torch's SGD arithmetic without the import of its compiler stack (``optim.SGD``)."""
    from lab.bench.easyscale.optim import SGD

    return SGD(params, lr=cfg.lr, momentum=0.9, weight_decay=5e-4)


def job_model(cfg: Config, device: Any = None) -> Any:
    """The model every worker starts from (same seed everywhere, initialised on the CPU so
    every device starts from the same bits), in training mode, on ``device``; at D1 on CUDA
    with deterministic pooling (``cuda_d1``)."""
    ctxmod.seed_all(cfg.seed)
    model = build_model(cfg).train()
    if device is None:
        return model
    if device.type == "cuda" and parse_level(cfg.level)[0]:
        cuda_d1.replace_pooling(model)
    return model.to(device)


def loss_of(cfg: Config, device: Any) -> Any:
    """The loss function of every worker of the job (``cuda_d1.loss_function``)."""
    return cuda_d1.loss_function(device, parse_level(cfg.level)[0])


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
    if cfg.resume:
        first = ctxmod.load_shared(cfg.resume, model, opt, cfg.ests)
        contexts = [ctxmod.load_context(cfg.resume, i) for i in mine]
    else:
        first = cfg.start_step
        contexts = [ctxmod.fresh_context(i, cfg.seed, model) for i in mine]
    if not cfg.switch:
        contexts[0].restore(model)
    beside = None
    if cfg.ddp_beside:
        from lab.bench.easyscale.ddp import DDPStepper

        beside = DDPStepper(cfg, rank, device)
    done = first + cfg.steps
    for step in range(first, first + cfg.steps):
        began = clock(device)
        grads = []
        for ctx in contexts:
            t0 = clock(device)
            if cfg.switch:
                ctx.restore(model)
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
                ctx.capture(model)
            t4 = clock(device)
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
