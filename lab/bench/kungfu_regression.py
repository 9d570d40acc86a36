"""KungFu's own optimizers on pair averaging's regression task:
``kungfu-run -np N python -m lab.bench.kungfu_regression --mode pair``.

The task is lab.bench.pair_averaging's least squares (same data per rank, same batches,
plain SGD from w = 0, the same ``eval_loss`` on the shared evaluation set), but the
distribution is KungFu's: ``PairAveragingOptimizer`` (``--mode pair``) or
``SynchronousSGDOptimizer`` (``--mode sync``) wrapping a tf-keras SGD. Run beside the
lab's implementation (MPI one-sided) with the same flags, the two loss curves check the
lab's pair averaging against the original (lab.bench.kungfu_crosscheck).

Records are pair_averaging's: header, one ``step`` record per step with ``eval_loss``,
summary with the final ``eval_loss``; ``backend`` is "kungfu-pair-avg" or "kungfu-sync".

Peers end at a barrier, as KungFu's own examples do. Pair averaging lets peers drift apart,
and a peer that had exited left another that still requested its model waiting for good:
with warm-up garbage frozen, one peer finished its 300 steps while the other was at 227.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from lab.bench.pair_averaging import make_regression, squared_loss
from lab.errors import ParameterError, require_at_least

MODES = ("pair", "sync")
BACKEND = {"pair": "kungfu-pair-avg", "sync": "kungfu-sync"}
IMPLEMENTATION = {
    "pair": "KungFu PairAveragingOptimizer",
    "sync": "KungFu SynchronousSGDOptimizer",
}


def run(ns: argparse.Namespace) -> int:
    """Train on every KungFu peer; returns the exit code."""
    from lab.bench.backends import common
    from lab.bench.backends.kungfu import import_kungfu
    from lab.bench.synthetic import Config

    tf = common.setup_tensorflow(ns.threads)
    import_kungfu()
    import tf_keras
    from kungfu.python import current_cluster_size, current_rank, run_barrier
    from kungfu.tensorflow.optimizers import PairAveragingOptimizer, SynchronousSGDOptimizer

    rank, size = current_rank(), current_cluster_size()
    data = make_regression(ns.seed, rank, ns.features, ns.samples, ns.noise)
    w = tf.Variable(np.zeros(ns.features, np.float32))
    base = tf_keras.optimizers.SGD(ns.lr)
    wrap = PairAveragingOptimizer if ns.mode == "pair" else SynchronousSGDOptimizer
    opt = wrap(base)
    rng = np.random.default_rng([ns.seed, 2, rank])  # pair_averaging's batch stream

    @common.step_function(tf)
    def train_step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            r = tf.linalg.matvec(x, w) - y
            loss = 0.5 * tf.reduce_mean(r * r)
        opt.apply_gradients([(tape.gradient(loss, w), w)])
        return loss

    cfg = Config(
        model="linear",
        batch_size=ns.batch_size,
        image_size=0,
        warmup_steps=ns.warmup_steps,
        steps=ns.steps,
        lr=ns.lr,
        seed=ns.seed,
        backend=BACKEND[ns.mode],
        threads=ns.threads,
        data="regression",
    )
    extra = {"implementation": IMPLEMENTATION[ns.mode], "mode": ns.mode, "task": "regression"}
    extra |= {"features": ns.features, "noise": ns.noise, "optimum_loss": data.optimum_loss}
    extra |= {"initial_loss": squared_loss(data.x_eval, data.y_eval, w.numpy())}
    rep = common.Reporter(cfg, rank, size, "CPU", root=rank == 0, extra=extra)
    rep.header(ns.features, floats_exchanged=ns.features)
    for i in range(ns.warmup_steps + ns.steps):
        idx = rng.integers(0, len(data.y), ns.batch_size)
        start = time.perf_counter()
        loss = float(train_step(tf.constant(data.x[idx]), tf.constant(data.y[idx])))
        seconds = time.perf_counter() - start
        ev = squared_loss(data.x_eval, data.y_eval, w.numpy())
        rep.step(i, seconds, loss, eval_loss=round(ev, 6))
    rep.summary(eval_loss=round(squared_loss(data.x_eval, data.y_eval, w.numpy()), 6))
    run_barrier()  # no peer leaves while another may still request its model
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m lab.bench.kungfu_regression",
        description="Least squares on KungFu's pair averaging or sync SGD; run under kungfu-run.",
    )
    p.add_argument("--mode", choices=MODES, default="pair")
    p.add_argument("--batch-size", type=int, default=32, help="per-peer batch size")
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="TensorFlow threads (0: TF's default)")
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--samples", type=int, default=4096, help="samples per rank")
    p.add_argument("--noise", type=float, default=0.1, help="label noise std")
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The flags, checked; a bad one prints the allowed values and exits with 2."""
    parser = _parser()
    ns = parser.parse_args(argv)
    try:
        require_at_least(
            ("batch-size", ns.batch_size, 1),
            ("steps", ns.steps, 1),
            ("warmup-steps", ns.warmup_steps, 0),
            ("threads", ns.threads, 0),
            ("features", ns.features, 1),
            ("samples", ns.samples, 1),
        )
        if not ns.lr > 0:
            raise ParameterError("lr", ns.lr, "a number > 0")
        if not ns.noise >= 0:
            raise ParameterError("noise", ns.noise, "a number >= 0")
    except ParameterError as exc:
        parser.error(str(exc))
    return ns


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
