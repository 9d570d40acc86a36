"""KungFu's own optimizers on pair averaging's regression task:
``kungfu-run -np N python -m lab.bench.kungfu_regression --mode pair``.

The task is lab.bench.pair_averaging's least squares (same data per rank, same batches,
plain SGD from w = 0, the same ``eval_loss`` on the shared evaluation set), but the
distribution is KungFu's: ``PairAveragingOptimizer`` (``--mode pair``) or
``SynchronousSGDOptimizer`` (``--mode sync``) wrapping a tf-keras SGD. Run beside the
lab's implementation (MPI one-sided) with the same flags, the two loss curves check the
lab's pair averaging against the original (tests/cluster/test_kungfu_real.py).

Records are pair_averaging's: header, one ``step`` record per step with ``eval_loss``,
summary with the final ``eval_loss``; ``backend`` is "kungfu-pair-avg" or "kungfu-sync".

Peers end at a barrier, as KungFu's own examples do. Pair averaging lets peers drift apart,
and a peer that had exited left another that still requested its model waiting for good:
with warm-up garbage frozen, one peer finished its 300 steps while the other was at 227.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from lab.bench.config import flag
from lab.bench.pair_averaging import (
    REGRESSION_MODEL,
    RegressionConfig,
    make_regression,
    pad_step,
    squared_loss,
)
from lab.bench.shares_wait import wait_before_step

BACKEND = {"pair": "kungfu-pair-avg", "sync": "kungfu-sync"}
IMPLEMENTATION = {
    "pair": "KungFu PairAveragingOptimizer",
    "sync": "KungFu SynchronousSGDOptimizer",
}


def run(cfg: Config) -> int:
    """Train on every KungFu peer; returns the exit code."""
    from lab.bench.backends import common
    from lab.bench.backends.kungfu import import_kungfu

    tf = common.setup_tensorflow(cfg.threads)
    import_kungfu()
    import tf_keras
    from kungfu.python import current_cluster_size, current_rank, run_barrier
    from kungfu.tensorflow.optimizers import PairAveragingOptimizer, SynchronousSGDOptimizer

    rank, size = current_rank(), current_cluster_size()
    data = make_regression(cfg.seed, rank, cfg.features, cfg.samples, cfg.noise)
    w = tf.Variable(np.zeros(cfg.features, np.float32))
    base = tf_keras.optimizers.SGD(cfg.lr)
    wrap = PairAveragingOptimizer if cfg.mode == "pair" else SynchronousSGDOptimizer
    opt = wrap(base)
    rng = np.random.default_rng([cfg.seed, 2, rank])  # pair_averaging's batch stream

    @common.step_function(tf)
    def train_step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            r = tf.linalg.matvec(x, w) - y
            loss = 0.5 * tf.reduce_mean(r * r)
        opt.apply_gradients([(tape.gradient(loss, w), w)])
        return loss

    extra = {"implementation": IMPLEMENTATION[cfg.mode], "mode": cfg.mode, "task": "regression"}
    extra |= {"features": cfg.features, "noise": cfg.noise, "optimum_loss": data.optimum_loss}
    extra |= {"initial_loss": squared_loss(data.x_eval, data.y_eval, w.numpy())}
    rep = common.Reporter(cfg, rank, size, "CPU", root=rank == 0, extra=extra)
    rep.header(cfg.features, floats_exchanged=cfg.features)
    for i in range(cfg.warmup_steps + cfg.steps):
        wait_before_step(i, cfg.warmup_steps, rank)  # an emulated host's share
        idx = rng.integers(0, len(data.y), cfg.batch_size)
        start = time.perf_counter()
        pad_step(start, cfg.step_time)  # the model's compute, before its averaging request
        loss = float(train_step(tf.constant(data.x[idx]), tf.constant(data.y[idx])))
        seconds = time.perf_counter() - start
        ev = squared_loss(data.x_eval, data.y_eval, w.numpy())
        rep.step(i, seconds, loss, eval_loss=round(ev, 6))
    rep.summary(eval_loss=round(squared_loss(data.x_eval, data.y_eval, w.numpy()), 6))
    run_barrier()  # no peer leaves while another may still request its model
    return 0


@dataclasses.dataclass(frozen=True)
class Config(RegressionConfig):
    """The regression's settings (no image model: ``--model`` and its image size are left
    unread); its mode, task and checks are pair averaging's (``RegressionConfig``)."""

    MODULE = "lab.bench.kungfu_regression"
    DESCRIPTION = "Least squares on KungFu's pair averaging or sync SGD; run under kungfu-run."
    BACKENDS = BACKEND

    batch_size: int = flag(32, "per-peer batch size")
    warmup_steps: int = flag(0, "steps run before timing counts")
    steps: int = flag(100, "steps (per peer)")
    lr: float = flag(0.05, "learning rate")
    threads: int = flag(1, "TensorFlow threads (0: TF's default)")

    def model_and_size(self) -> tuple[str, int]:
        return REGRESSION_MODEL, 0


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """The checked flags; a bad one prints the allowed values and exits with 2."""
    return Config.main_config(argv)


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
