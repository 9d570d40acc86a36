"""No communication: one process trains alone (the "ideal" per-worker throughput of KungFu's
Fig 9). Several independent copies may run side by side under any launcher; each reports
as its own rank."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from lab.bench.backends import common
from lab.bench.models import build_model, count_params

if TYPE_CHECKING:
    from lab.bench.synthetic import Config


def run(cfg: Config) -> int:
    tf = common.setup_tensorflow(cfg.threads)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    common.pin_gpu(tf, int(os.environ.get("LOCAL_RANK", "0")))
    common.seed_everything(cfg)
    model = build_model(cfg.model, cfg.image_size, cfg.num_classes)
    opt = common.make_optimizer(cfg)
    images, labels = common.make_data(tf, cfg, rank)

    @common.step_function(tf)
    def train_step() -> Any:
        with tf.GradientTape() as tape:
            loss = common.mean_loss(tf, labels, model(images, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    # Independent copies: each is a world of one, whatever launcher started it.
    rep = common.Reporter(cfg, rank, 1, common.device_name(tf), extra=common.versions(tf))
    rep.header(count_params(model), copies=world)
    common.run_loop(cfg, rep, lambda i: (train_step(), {}))
    return 0
