"""Adaptive batch size from the gradient noise scale (KungFu OSDI'20, Fig 4):
the policy (pure) and ``python -m lab.bench.adaptive``, a workload on Horovod all-reduce.

The policy follows KungFu's GNS policy example (examples/policies/gns_policy): every step
it folds the ratio |B_noise| / B (the noise scale over the current global batch) into an
exponential moving average whose new samples are first clamped to [EMA / cap, EMA × cap]
(so one wild estimate cannot swing it); every ``interval`` steps (KungFu: every epoch) it
compares the EMA with its value at the previous decision and, if it rose, multiplies the
batch by ``growth``, capped at ``max_batch``. KungFu's constants are the defaults: EMA
weight 0.9 on the old value, clamp factor 2, growth ×2, cap 1024.

The workload trains the least-squares task of lab.bench.pair_averaging (known optimum)
with synchronous SGD on ``hvd.allreduce``. Each step every rank computes its local
gradient on B / size samples and the averaged one; the two give the noise-scale terms of
lab.bench.monitors (McCandlish et al.), averaged over ranks so every rank holds the same
estimate, smoothed by KungFu's NoiseScaleEMA, and handed to the policy, which therefore
takes the same decision everywhere. Records: ``step`` {step, samples (this rank's),
batch_size (global), size, seconds, loss, eval_loss, noise_scale, warmup}, an ``event``
{"name": "batch_size", "old", "new"} on each change, and a ``summary`` with the time,
steps and samples to ``--target-loss``. ``--policy fixed`` is the fixed-batch baseline.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from lab.errors import ParameterError, require_at_least
from lab.metrics.records import emit

POLICIES = ("adaptive", "fixed")


@dataclass
class AdaptiveBatchPolicy:
    """Grow the global batch when the smoothed |noise scale| / batch rises.

    Args:
        batch: the starting global batch size.
        max_batch: the cap.
        growth: the factor applied on growth.
        decay: the EMA's weight on its old value (KungFu: 0.9).
        clamp: a new ratio is clamped to [EMA / clamp, EMA × clamp] (KungFu: 2).
        interval: steps between decisions (the shortest time between two changes).
        multiple_of: the batch stays a multiple of this (the number of workers).
    """

    batch: int
    max_batch: int = 1024
    growth: float = 2.0
    decay: float = 0.9
    clamp: float = 2.0
    interval: int = 10
    multiple_of: int = 1
    ema: float | None = field(default=None, init=False)
    last_decision: float | None = field(default=None, init=False)
    steps: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        checks = (
            ("batch", self.batch >= 1),
            ("max-batch", self.max_batch >= self.batch),
            ("growth", self.growth > 1.0),
            ("decay", 0.0 <= self.decay < 1.0),
            ("clamp", self.clamp >= 1.0),
            ("interval", self.interval >= 1),
            ("multiple-of", self.multiple_of >= 1 and self.batch % self.multiple_of == 0),
        )
        for name, ok in checks:
            if not ok:
                raise ParameterError(name, getattr(self, name.replace("-", "_")), _RULES[name])

    def observe(self, noise_scale: float) -> int:
        """Fold in one step's noise scale (measured at the current batch); returns the
        global batch for the next step. Non-finite values count as a step but are ignored."""
        if math.isfinite(noise_scale):
            ratio = abs(noise_scale) / self.batch
            if self.ema is None:
                self.ema = ratio
            else:
                ratio = min(max(ratio, self.ema / self.clamp), self.ema * self.clamp)
                self.ema = self.decay * self.ema + (1.0 - self.decay) * ratio
        self.steps += 1
        if self.steps >= self.interval and self.ema is not None:
            self.steps = 0
            if self.last_decision is not None and self.ema > self.last_decision:
                self.batch = self.grown()
            self.last_decision = self.ema
        return self.batch

    def grown(self) -> int:
        """The next larger batch: × growth, a multiple of ``multiple_of``, at most the cap."""
        m = self.multiple_of
        want = max(self.batch + m, math.ceil(self.batch * self.growth / m) * m)
        cap = self.max_batch // m * m
        return max(self.batch, min(want, cap))


_RULES = {
    "batch": "an integer >= 1",
    "max-batch": "an integer >= the starting batch",
    "growth": "a number > 1",
    "decay": "a number in [0, 1)",
    "clamp": "a number >= 1",
    "interval": "an integer >= 1",
    "multiple-of": "an integer >= 1 that divides the starting batch",
}


@dataclass
class FixedBatchPolicy:
    """The baseline: the same global batch throughout."""

    batch: int

    def observe(self, noise_scale: float) -> int:
        return self.batch


# ---------------------------------------------------------------------- the workload


def run(ns: argparse.Namespace) -> int:
    """Train the regression task under Horovod with the chosen policy."""
    import numpy as np

    from lab.bench import monitors
    from lab.bench.backends import common
    from lab.bench.backends.horovod import import_horovod
    from lab.bench.pair_averaging import make_regression, squared_loss

    tf = common.setup_tensorflow(ns.threads)
    hvd = import_horovod()
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    if size < 2:
        raise ParameterError("np", size, "at least 2 ranks (the noise scale needs two batch sizes)")
    if ns.batch_size % size:
        raise ParameterError("batch-size", ns.batch_size, f"a multiple of the {size} ranks")
    data = make_regression(ns.seed, rank, ns.features, ns.samples, ns.noise)
    policy: AdaptiveBatchPolicy | FixedBatchPolicy
    if ns.policy == "fixed":
        policy = FixedBatchPolicy(ns.batch_size)
    else:
        policy = AdaptiveBatchPolicy(
            ns.batch_size, ns.max_batch_size, ns.growth, interval=ns.interval, multiple_of=size
        )
    target = ns.target_loss if ns.target_loss > 0 else 2.0 * data.optimum_loss
    w = np.zeros(ns.features, np.float32)
    rng = np.random.default_rng([ns.seed, 2, rank])
    gns_ema = monitors.NoiseScaleEMA()
    emit(
        "header",
        rank=rank,
        world_size=size,
        model="linear",
        params=ns.features,
        backend="horovod",
        implementation=f"{ns.policy} batch (lab, Horovod allreduce)",
        policy=ns.policy,
        batch_size=ns.batch_size,
        max_batch_size=ns.max_batch_size,
        lr=ns.lr,
        steps=ns.steps,
        target_loss=target,
        optimum_loss=data.optimum_loss,
        initial_loss=squared_loss(data.x_eval, data.y_eval, w),
        device=common.device_name(tf),
        horovod=_hvd_version(),
    )
    batch, started, reached, samples_seen, rates = ns.batch_size, time.time(), None, 0, []
    for step in range(ns.steps):
        t0 = time.perf_counter()
        local_b = batch // size
        idx = rng.integers(0, len(data.y), local_b)
        x, y = data.x[idx], data.y[idx]
        r = x @ w - y
        loss = float(0.5 * np.mean(r * r))
        g_local = (x.T @ r / local_b).astype(np.float32)
        g_avg = hvd.allreduce(tf.constant(g_local), op=hvd.Average, name="grad").numpy()
        g_sq, s = monitors.noise_scale_np([g_local], [g_avg], local_b, batch)
        terms = hvd.allreduce(tf.constant([g_sq, s], tf.float64), op=hvd.Average, name="gns")
        noise_scale = gns_ema.update(*(float(v) for v in terms.numpy()))
        w -= np.float32(ns.lr) * g_avg
        seconds = time.perf_counter() - t0
        samples_seen += batch
        ev = squared_loss(data.x_eval, data.y_eval, w)
        if reached is None and ev <= target:
            reached = {"seconds": time.time() - started, "steps": step + 1, "samples": samples_seen}
        rates.append(batch / seconds)
        emit(
            "step",
            rank=rank,
            step=step,
            samples=local_b,
            batch_size=batch,
            size=size,
            seconds=round(seconds, 6),
            warmup=False,
            loss=round(loss, 6),
            eval_loss=round(ev, 6),
            noise_scale=round(noise_scale, 6),
        )
        if rank == 0:
            print(f"Iter #{step}: {local_b / seconds:.1f} img/sec per CPU", flush=True)
        new = policy.observe(noise_scale)
        if new != batch:
            emit("event", rank=rank, name="batch_size", old=batch, new=new, step=step)
            batch = new
        if reached is not None and ns.until_target:
            break
    mean_rate = sum(rates) / len(rates)
    emit(
        "summary",
        rank=rank,
        world_size=size,
        img_per_sec=round(mean_rate / size, 3),
        total=round(mean_rate, 3),
        unit="img/sec per rank",
        steps=len(rates),
        final_batch_size=batch,
        eval_loss=round(squared_loss(data.x_eval, data.y_eval, w), 6),
        target_loss=target,
        time_to_target=None if reached is None else round(reached["seconds"], 6),
        steps_to_target=None if reached is None else reached["steps"],
        samples_to_target=None if reached is None else reached["samples"],
    )
    hvd.shutdown()
    return 0


def _hvd_version() -> str:
    try:
        import horovod

        return str(horovod.__version__)
    except (ImportError, AttributeError):  # pragma: no cover
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m lab.bench.adaptive",
        description="Least squares on Horovod all-reduce with a fixed or noise-scale-adaptive "
        "global batch; run it under horovodrun (2 ranks or more).",
    )
    p.add_argument("--policy", choices=POLICIES, default="adaptive")
    p.add_argument("--batch-size", type=int, default=8, help="starting global batch size")
    p.add_argument("--max-batch-size", type=int, default=1024, help="the policy's cap")
    p.add_argument("--growth", type=float, default=2.0, help="batch factor on growth")
    p.add_argument("--interval", type=int, default=10, help="steps between decisions")
    p.add_argument("--steps", type=int, default=300, help="at most this many steps")
    p.add_argument("--target-loss", type=float, default=0.0, help="0: 2 × the optimum loss")
    p.add_argument("--until-target", action="store_true", help="stop at the target loss")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--samples", type=int, default=4096, help="samples per rank")
    p.add_argument("--noise", type=float, default=0.1, help="label noise std")
    p.add_argument("--threads", type=int, default=1, help="TensorFlow threads (0: TF's default)")
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Flags, checked before TensorFlow or Horovod is imported (exit code 2 if bad)."""
    parser = _parser()
    ns = parser.parse_args(argv)
    try:
        if ns.policy == "adaptive":
            AdaptiveBatchPolicy(ns.batch_size, ns.max_batch_size, ns.growth, interval=ns.interval)
        require_at_least(
            ("batch-size", ns.batch_size, 1),
            ("steps", ns.steps, 1),
            ("features", ns.features, 1),
            ("samples", ns.samples, 1),
            ("threads", ns.threads, 0),
        )
        if not ns.lr > 0:
            raise ParameterError("lr", ns.lr, "a number > 0")
    except ParameterError as exc:
        parser.error(str(exc))
    return ns


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    try:
        return run(ns)
    except ParameterError as exc:
        print(f"python -m lab.bench.adaptive: error: {exc}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
