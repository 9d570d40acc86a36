"""P3's baseline engine for real: MXNet 1.9.1's distributed KVStore (ps-lite over ZeroMQ).

``python -m lab.bench.p3.mxnet_workload`` is started by the ``dmlc`` launcher as every
process of the job, like MXNet's ``tools/launch.py`` does: for the scheduler and the
servers (``DMLC_ROLE``), ``import mxnet`` itself runs the ps-lite node and exits when the
workers are done; a worker trains a model of ``lab.bench.p3.mxnet_models`` on random
images, pushing each gradient and pulling each weight with ``priority=-index`` (index =
the parameter's position from the input, P3's order) on ``dist_sync``, the servers
applying SGD. ``MXNET_KVSTORE_BIGARRAY_BOUND`` (stock MXNet: 1,000,000) decides which
tensors are split over the servers.

A worker prints an ``@lab header`` and ``summary``, an ``@lab step`` record per warm-up
step (on emulated hosts the first one is what gives the hosts their CPU shares,
lab.cluster.emulation.startup; without it the whole run went at full speed), and one line
of MXNet's own ``mx.callback.Speedometer`` per timed step (``Epoch[0] Batch [k-1-k]\\tSpeed:
X samples/sec\\tloss=Y``), which ``lab.metrics.parsers`` reads as that worker's step
throughput. Runs under the MXNet venv (numpy < 1.24): no pandas, torch or lab.metrics
beyond ``records``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
from collections.abc import Sequence

from lab.bench.config import flag
from lab.bench.flags import TrainingConfig
from lab.bench.p3 import mxnet_models
from lab.bench.shares_wait import wait_for_shares
from lab.errors import ParameterError
from lab.metrics.records import emit

KVSTORES = ("dist_sync", "dist_device_sync", "dist_async")


@dataclasses.dataclass(frozen=True)
class Config(TrainingConfig):
    """A worker's settings (see ``--help``); the models are lab.bench.p3.mxnet_models'."""

    MODULE = "lab.bench.p3.mxnet_workload"
    DESCRIPTION = __doc__.splitlines()[0]

    model: str = flag("vgg_like", ", ".join(mxnet_models.MODELS))
    warmup_steps: int = flag(2, "steps run before timing counts (>= 1: Speedometer's start)")
    steps: int = flag(8, "timed steps (per worker)")
    kvstore: str = flag("dist_sync", ", ".join(KVSTORES))

    def checked(self) -> Config:
        cfg = super().checked()
        if cfg.warmup_steps < 1:  # Speedometer needs one step to start its clock
            raise ParameterError("warmup_steps", cfg.warmup_steps, "an integer >= 1")
        if cfg.kvstore not in KVSTORES:
            raise ParameterError("kvstore", cfg.kvstore, ", ".join(KVSTORES))
        return cfg

    def model_and_size(self) -> tuple[str, int]:
        model = mxnet_models.check_model(self.model)
        size = (
            mxnet_models.default_image_size(model) if self.image_size is None else self.image_size
        )
        if size < 8:
            raise ParameterError("image_size", size, "an integer >= 8")
        return model, size


def parse_args(argv: Sequence[str] | None = None) -> Config:
    return Config.main_config(argv)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    import mxnet as mx  # a scheduler or server process serves here and exits
    from mxnet import autograd, gluon

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s", force=True)
    kv = mx.kv.create(cfg.kvstore)
    # the lab's rank (the launcher's RANK) names the log; ps-lite numbers workers its own way
    rank, workers = int(os.environ.get("RANK", kv.rank)), kv.num_workers
    mx.random.seed(cfg.seed)
    net = mxnet_models.build(cfg.model, cfg.num_classes)
    # a CUDA build of MXNet (mxnet-cu* on GPU nodes) trains on the worker's GPU, the PyPI
    # CPU build on the CPU; the launcher has set CUDA_VISIBLE_DEVICES to the slot's GPU
    ctx = mx.gpu(0) if mx.context.num_gpus() > 0 else mx.cpu()
    net.initialize(mx.init.Xavier(), ctx=ctx)
    net.hybridize()
    shape = (cfg.batch_size, 3, cfg.image_size, cfg.image_size)
    images = mx.nd.random.uniform(shape=shape, ctx=ctx)
    labels = mx.nd.random.randint(0, cfg.num_classes, shape=(cfg.batch_size,), ctx=ctx)
    labels = labels.astype("float32")
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    # One forward and backward pass before the keys are made, as Gluon's Trainer orders it:
    # it materialises the deferred shapes (with MXNet 1.9.1, initialising the keys right
    # after a plain forward pass makes the servers see pulls of keys not yet initialised).
    with autograd.record():
        loss_fn(net(images), labels).backward()
    params = mxnet_models.trainable(net)
    sgd = mx.optimizer.SGD(learning_rate=cfg.lr, rescale_grad=1.0 / cfg.batch_size)
    kv.set_optimizer(sgd)  # the servers apply SGD to the sum of the workers' gradients
    for i, p in enumerate(params):  # init + pull, as Gluon's Trainer: worker 0's values
        kv.broadcast(i, p.data(), out=p.data(), priority=-i)
    mx.nd.waitall()
    n_params = sum(int(p.data().size) for p in params)
    emit("header", rank=rank, kv_rank=kv.rank, world_size=workers, model=cfg.model, params=n_params,
         backend=f"mxnet-{cfg.kvstore}", engine=f"MXNet {mx.__version__} KVStore",
         servers=kv.num_servers if hasattr(kv, "num_servers") else None, keys=len(params),
         big_bound=int(os.environ.get("MXNET_KVSTORE_BIGARRAY_BOUND", 1_000_000)),
         batch_size=cfg.batch_size, image_size=cfg.image_size, steps=cfg.steps,
         warmup_steps=cfg.warmup_steps, lr=cfg.lr, pid=os.getpid(), device=str(ctx),
         host=os.environ.get("DISTLAB_HOST", "localhost"))  # fmt: skip

    metric = mx.metric.Loss("loss")
    speedometer = mx.callback.Speedometer(cfg.batch_size, frequent=1)
    started, losses = time.perf_counter(), []
    last = started
    for step in range(cfg.warmup_steps + cfg.steps):
        if step == cfg.warmup_steps - 1 and step >= 1:
            # an emulated host's share (lab.bench.shares_wait) before the last warm-up
            # step, whose loss starts the timed interval; step 0's record is out
            wait_for_shares(rank)
            last = time.perf_counter()
        with autograd.record():
            loss = loss_fn(net(images), labels)
        loss.backward()
        for i, p in enumerate(params):  # backprop order ends at the input: P3's priorities
            kv.push(i, p.grad(), priority=-i)
            kv.pull(i, out=p.data(), priority=-i)
        metric.update(None, [loss])  # reads the loss: this step's forward has finished
        losses.append(metric.get()[1])
        if step < cfg.warmup_steps:  # lets an emulated host's share apply before timing
            now = time.perf_counter()
            emit("step", rank=rank, step=step, samples=cfg.batch_size,
                 seconds=round(now - last, 6), warmup=True)  # fmt: skip
            last = now
        # Each timed interval runs from one step's loss to the next's: the previous step's
        # backward and push/pull, then this step's forward, which waits layer by layer for
        # its pulls. (No waitall at the warmup's end: the first interval would then hold
        # no communication.)
        if step == cfg.warmup_steps - 1:
            started = time.perf_counter()
        if step >= cfg.warmup_steps - 1:  # the first call starts Speedometer's clock
            batch = mx.model.BatchEndParam(0, step - cfg.warmup_steps + 1, metric, locals())
            speedometer(batch)
    mx.nd.waitall()
    seconds = time.perf_counter() - started
    emit("summary", rank=rank, world_size=workers, steps=cfg.steps,
         img_per_sec=round(cfg.steps * cfg.batch_size / seconds, 3), unit="img/sec per worker",
         loss=round(float(losses[-1]), 6))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
