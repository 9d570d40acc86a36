"""Synchronous SGD with TensorFlow's MultiWorkerMirroredStrategy (collective all-reduce).

A third synchronous engine beside Horovod and KungFu. If TF_CONFIG is set it is used as
is; otherwise it is built from the ``local`` launcher's variables: RANK, WORLD_SIZE and
MASTER_ADDR, with worker i listening on MASTER_ADDR:(port base + i). The port base is
``--port-base``, else MASTER_PORT + 1, else 23456. That puts every worker on MASTER_ADDR,
which is right for one host; a multi-host run passes TF_CONFIG.

The step all-reduces the gradients itself (``ReplicaContext.all_reduce``, mean) and applies
them without the optimizer's own aggregation, so the local gradients are at hand for the
monitors (``--monitor``), which therefore run on this engine too.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from lab.bench import monitors
from lab.bench.backends import common
from lab.bench.models import build_model, count_params
from lab.errors import ParameterError

if TYPE_CHECKING:
    from lab.bench.synthetic import Config

DEFAULT_PORT_BASE = 23456


def tf_config_from_env(port_base: int = 0) -> dict[str, Any]:
    """The TF_CONFIG of this rank: the given one, or one built from RANK/WORLD_SIZE and
    every rank's address (LAB_RANK_ADDRS; MASTER_ADDR for all when it is not set)."""
    raw = os.environ.get("TF_CONFIG")
    if raw:
        return json.loads(raw)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    if not port_base:
        master = os.environ.get("MASTER_PORT")
        port_base = int(master) + 1 if master else DEFAULT_PORT_BASE
    addrs = os.environ.get("LAB_RANK_ADDRS", "").split(",")  # set by the local launcher
    if len(addrs) != world:
        addrs = [addr] * world
    workers = [f"{addrs[i]}:{port_base + i}" for i in range(world)]
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}}


def run(cfg: Config) -> int:
    conf = tf_config_from_env(cfg.port_base)
    os.environ["TF_CONFIG"] = json.dumps(conf)
    rank = int(conf["task"]["index"])
    world = len(conf["cluster"]["worker"])
    if cfg.monitor != "none" and world < 2:
        raise ParameterError("WORLD_SIZE", world, f"at least 2 ranks for --monitor {cfg.monitor}")
    tf = common.setup_tensorflow(cfg.threads)
    common.pin_gpu(tf, int(os.environ.get("LOCAL_RANK", "0")))
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    common.seed_everything(cfg)
    with strategy.scope():
        model = build_model(cfg.model, cfg.image_size, cfg.num_classes)
        opt = common.make_optimizer(cfg)
    images, labels = common.make_data(tf, cfg, rank)
    b_small, b_big = float(cfg.batch_size), float(cfg.batch_size * world)
    mean = tf.distribute.ReduceOp.MEAN

    @common.step_function(tf)
    def train_step(measure: bool) -> Any:
        def replica_fn() -> Any:
            ctx = tf.distribute.get_replica_context()
            with tf.GradientTape() as tape:
                loss = common.mean_loss(tf, labels, model(images, training=True))
            variables = model.trainable_variables
            local = tape.gradient(loss, variables)
            grads = ctx.all_reduce(mean, local)  # the collective all-reduce, written out
            outputs: dict[str, Any] = {}
            if measure:
                average = lambda ts: ctx.all_reduce(mean, ts)  # noqa: E731
                outputs = monitors.tf_measure(cfg.monitor, local, grads, average, b_small, b_big)
            opt.apply_gradients(zip(grads, variables, strict=True), skip_gradients_aggregation=True)
            return loss, outputs

        return strategy.experimental_local_results(strategy.run(replica_fn))[0]

    def step_fn(i: int) -> tuple[Any, dict[str, Any]]:
        return train_step(cfg.monitor != "none" and i % cfg.interval == 0)

    rep = common.Reporter(
        cfg, rank, world, common.device_name(tf), root=rank == 0, extra=common.versions(tf)
    )
    rep.header(count_params(model), replicas=strategy.num_replicas_in_sync)
    common.run_loop(cfg, rep, step_fn, monitors.MonitorSink(rep.metric))
    return 0
