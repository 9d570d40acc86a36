"""Adaptive batch size from the gradient noise scale (KungFu OSDI'20, Fig 4):
the policy (pure) and ``python -m lab.bench.adaptive``, a workload on Horovod all-reduce.

The policy follows KungFu's GNS policy example (examples/policies/gns_policy): every step
it folds the ratio |B_noise| / B (the noise scale over the current global batch) into an
exponential moving average whose new samples are first clamped to [EMA / cap, EMA × cap]
(so one wild estimate cannot swing it); every ``interval`` steps (KungFu: every epoch) it
compares the EMA with its value at the previous decision and, if it rose, multiplies the
batch by ``growth``, capped at ``max_batch``. KungFu's constants are the defaults: EMA
weight 0.9 on the old value, clamp factor 2, growth ×2, cap 1024.

The workload trains lab.bench.teacher_task (softmax regression taught by a softmax
teacher, fresh samples every step: its noise scale grows as the loss falls, as in the
setting KungFu's policy is built for) with synchronous SGD on ``hvd.allreduce``. Each step
every rank computes its local gradient on B / size samples; one allreduce averages the
gradients and their squared norms, which give the noise-scale terms of lab.bench.monitors
(McCandlish et al.) as the ranks' average, so every rank holds the same estimate,
smoothed by KungFu's NoiseScaleEMA and handed to the policy, which therefore takes the
same decision everywhere. ``--seeds N`` trains N times in one launch (seeds ``seed`` ..
``seed + N - 1``: the sampling streams differ, the teacher is the same), so intervals over
seeds cost one start-up. ``--policy fixed`` is the fixed-batch baseline; ``--arms
adaptive:32,fixed:1024`` trains every seed under each of these policies (policy:start
batch) in turn, the order reversed every other seed, so the times a seed compares are taken
seconds apart and a drift in the machine's speed falls on every arm alike (separate launches
put minutes between them). Records, each with the arm's ``policy`` and ``start_batch``:
``step`` {seed, step, samples (this rank's), batch_size (global), size, seconds, loss,
eval_loss, noise_scale, warmup}, an ``event`` {"name": "batch_size", "old", "new"} on each
change, one {"name": "gc_frozen"} before each arm's steps
(lab.bench.backends.common.freeze_garbage), and per seed and arm a ``summary`` with the
training time (the steps' seconds; evaluation is not counted), steps and samples to
``--target-loss``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lab.bench.config import WorkloadConfig, flag
from lab.errors import ParameterError, require_at_least, require_positive
from lab.metrics.records import emit

POLICIES = ("adaptive", "fixed")
TARGET_FACTOR = 1.1  # the default target loss: this much above the teacher's (the optimum)


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


Arm = tuple[str, int]  # a policy and its starting global batch


def parse_arms(text: str) -> list[Arm]:
    """``"adaptive:32,fixed:1024"`` → [("adaptive", 32), ("fixed", 1024)].

    Raises:
        ParameterError: an entry that is not ``policy:batch`` with a known policy and a
            batch >= 1, or the same arm twice.
    """
    arms: list[Arm] = []
    for entry in text.split(","):
        policy, _, batch = entry.strip().partition(":")
        if policy not in POLICIES or not batch.isdigit() or int(batch) < 1:
            raise ParameterError("arms", entry, f"policy:batch, policy one of {POLICIES}")
        arms.append((policy, int(batch)))
    if len(set(arms)) < len(arms):
        raise ParameterError("arms", text, "each policy:batch once")
    return arms


def arm_order(arms: Sequence[Arm], seed_index: int) -> list[Arm]:
    """The arms in the order seed number ``seed_index`` (0, 1, ...) trains them: as given,
    then reversed, alternately, so over two seeds every arm runs as early as every other."""
    return list(arms) if seed_index % 2 == 0 else list(reversed(arms))


def make_policy(
    policy: str, batch: int, ns: Config, size: int = 1
) -> AdaptiveBatchPolicy | FixedBatchPolicy:
    """The arm's policy with the flags' growth, cap and interval."""
    if policy == "fixed":
        return FixedBatchPolicy(batch)
    return AdaptiveBatchPolicy(
        batch, ns.max_batch_size, ns.growth, interval=ns.interval, multiple_of=size
    )


# ---------------------------------------------------------------------- the workload


def run(ns: Config) -> int:
    """Train the teacher task under Horovod with the chosen policy, once per seed."""
    from lab.bench.backends import common
    from lab.bench.backends.horovod import import_horovod
    from lab.bench.teacher_task import make_task

    tf = common.setup_tensorflow(ns.threads)
    hvd = import_horovod()
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    if size < 2:
        raise ParameterError("np", size, "at least 2 ranks (the noise scale needs two batch sizes)")
    for _, batch in ns.arm_list:
        if batch % size:
            raise ParameterError("batch-size", batch, f"a multiple of the {size} ranks")
    task = make_task(ns.seed, ns.features, ns.classes, ns.temperature)
    target = ns.target_loss if ns.target_loss > 0 else TARGET_FACTOR * task.optimum_loss
    emit(
        "header",
        rank=rank,
        world_size=size,
        model=f"softmax {ns.features}x{ns.classes} (teacher)",
        params=ns.features * ns.classes,
        backend="horovod",
        implementation=f"{' and '.join(dict.fromkeys(p for p, _ in ns.arm_list))} batch "
        "(lab, Horovod allreduce)",
        arms=[f"{p}:{b}" for p, b in ns.arm_list],
        max_batch_size=ns.max_batch_size,
        lr=ns.lr,
        steps=ns.steps,
        seeds=ns.seeds,
        target_loss=target,
        optimum_loss=task.optimum_loss,
        initial_loss=math.log(ns.classes),
        device=common.device_name(tf),
        horovod=_hvd_version(),
    )
    for i, seed in enumerate(range(ns.seed, ns.seed + ns.seeds)):
        for arm in arm_order(ns.arm_list, i):
            _train(ns, task, target, seed, arm, hvd, tf, rank, size)
    hvd.shutdown()
    return 0


def _train(ns: Config, task: Any, target: float, seed: int, arm: Arm, hvd: Any,
           tf: Any, rank: int, size: int) -> None:  # fmt: skip
    """One seed's training under one arm: steps until ``--steps`` (or the target, with
    --until-target)."""
    import numpy as np

    from lab.bench import monitors
    from lab.bench.backends import common

    name, batch = arm
    policy = make_policy(name, batch, ns, size)
    mark = {"seed": seed, "policy": name, "start_batch": batch}  # on every record of the arm
    w = np.zeros(task.shape, np.float32)
    rng = np.random.default_rng([seed, 2, rank])
    gns_ema = monitors.NoiseScaleEMA()
    trained, reached, samples_seen, rates = 0.0, None, 0, []
    common.freeze_garbage(rank, **mark)  # no full collection inside a timed step
    for step in range(ns.steps):
        t0 = time.perf_counter()
        local_b = batch // size
        loss, g_local = task.loss_and_grad(w, *task.sample(rng, local_b))
        # one allreduce carries the gradient and |g_local|²: the noise-scale terms are
        # linear in |g_local|², so terms from its rank average equal the ranks' averaged terms
        flat = np.append(g_local.ravel(), np.float32(monitors.squared_norm([g_local])))
        both = hvd.allreduce(tf.constant(flat), op=hvd.Average, name="grad").numpy()
        g_avg = both[:-1].reshape(g_local.shape)
        g_sq, s = monitors.noise_scale_terms(
            float(both[-1]), monitors.squared_norm([g_avg]), local_b, batch
        )
        noise_scale = gns_ema.update(g_sq, s)
        w -= np.float32(ns.lr) * g_avg
        seconds = time.perf_counter() - t0
        trained += seconds
        samples_seen += batch
        ev = task.eval_loss(w)
        if reached is None and ev <= target:
            reached = {"seconds": trained, "steps": step + 1, "samples": samples_seen}
        rates.append(batch / seconds)
        emit("step", rank=rank, **mark, step=step, samples=local_b, batch_size=batch,
             size=size, seconds=round(seconds, 6), warmup=False, loss=round(loss, 6),
             eval_loss=round(ev, 6), noise_scale=round(noise_scale, 6))  # fmt: skip
        if rank == 0 and step % 20 == 0:
            print(f"Iter #{step}: {local_b / seconds:.1f} img/sec per CPU", flush=True)
        new = policy.observe(noise_scale)
        if new != batch:
            emit("event", rank=rank, **mark, name="batch_size", old=batch, new=new, step=step)
            batch = new
        if reached is not None and ns.until_target:
            break
    mean_rate = sum(rates) / len(rates)
    emit(
        "summary",
        rank=rank,
        **mark,
        world_size=size,
        img_per_sec=round(mean_rate / size, 3),
        total=round(mean_rate, 3),
        unit="img/sec per rank",
        steps=len(rates),
        final_batch_size=batch,
        eval_loss=round(task.eval_loss(w), 6),
        target_loss=target,
        time_to_target=None if reached is None else round(reached["seconds"], 6),
        steps_to_target=None if reached is None else reached["steps"],
        samples_to_target=None if reached is None else reached["samples"],
    )


def _hvd_version() -> str:
    try:
        import horovod

        return str(horovod.__version__)
    except (ImportError, AttributeError):  # pragma: no cover
        return "unknown"


@dataclasses.dataclass(frozen=True)
class Config(WorkloadConfig):
    """The workload's settings; ``arm_list`` the arms they name."""

    MODULE = "lab.bench.adaptive"
    DESCRIPTION = (
        "Softmax regression taught by a teacher, on Horovod all-reduce, with a fixed or "
        "noise-scale-adaptive global batch; run it under horovodrun (2 ranks or more)."
    )

    policy: str = flag("adaptive", ", ".join(POLICIES))
    batch_size: int = flag(32, "starting global batch size")
    arms: str = flag(
        "", "policy:batch,... trained in turn on every seed (default: --policy:--batch-size)"
    )
    max_batch_size: int = flag(1024, "the policy's cap")
    growth: float = flag(2.0, "batch factor on growth")
    interval: int = flag(10, "steps between decisions")
    steps: int = flag(400, "at most this many steps per seed")
    seeds: int = flag(1, "train this many seeds, one by one")
    target_loss: float = flag(0.0, "0: 1.1 x the optimum loss")
    until_target: bool = flag(False, "stop at the target loss")
    lr: float = flag(1.0, "learning rate")
    seed: int = flag(1, "the teacher's and the first seed")
    features: int = flag(128, "the teacher's inputs")
    classes: int = flag(32, "the teacher's classes")
    temperature: float = flag(4.0, "teacher logits' std")
    threads: int = flag(1, "TensorFlow's and numpy's threads (0: theirs)")

    @property
    def arm_list(self) -> list[Arm]:
        """``--arms``, or the one arm of ``--policy`` and ``--batch-size``."""
        return parse_arms(self.arms) if self.arms else [(self.policy, self.batch_size)]

    def checked(self) -> Config:
        if self.policy not in POLICIES:
            raise ParameterError("policy", self.policy, ", ".join(POLICIES))
        for policy, batch in self.arm_list:
            make_policy(policy, batch, self)  # its parameters checked here, not on the ranks
        require_at_least(
            ("batch_size", self.batch_size, 1),
            ("steps", self.steps, 1),
            ("seeds", self.seeds, 1),
            ("features", self.features, 1),
            ("classes", self.classes, 2),
            ("threads", self.threads, 0),
        )
        require_positive(("lr", self.lr), ("temperature", self.temperature))
        return self


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """Flags, checked before TensorFlow or Horovod is imported (exit code 2 if bad)."""
    return Config.main_config(argv)


BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    if ns.threads:  # before numpy loads: its BLAS pool would otherwise take every core and
        for name in BLAS_THREADS:  # spin, two ranks on two cores then crawl (80 ms/step)
            os.environ.setdefault(name, str(ns.threads))
    try:
        return run(ns)
    except ParameterError as exc:
        print(f"python -m lab.bench.adaptive: error: {exc}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
