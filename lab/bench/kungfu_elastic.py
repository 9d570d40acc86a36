"""KungFu's own elastic training: ``python -m lab.bench.kungfu_elastic --schedule 5:2,10:1``
(or ``--timed-schedule 0:1,20:2,50:1,60:stop``) under ``kungfu-run -w`` (the ``kungfu``
launcher with ``elastic=True``).

KungFu OSDI'20 Fig 7 measures how long a running synchronous job takes to grow and to
shrink. This is that experiment on KungFu itself, in the shape of KungFu's elastic example
(examples/mnist_elastic_eager): synchronous SGD (``SynchronousSGDOptimizer``) on the
synthetic workload's model; at the global steps the schedule names, every peer calls
``kungfu.tensorflow.ops.resize(n)``: rank 0 proposes the new size to the config server,
all peers agree on it, kungfu-run starts the added peers and the removed ones see
``detached()`` and exit. After any change the model and the global step are broadcast
from rank 0 (a new peer first receives them, then trains).

A timed schedule (``SECONDS:SIZE,...,SECONDS:stop``, seconds since rank 0's first step, as
the Horovod Elastic driver plays it) is read off rank 0's clock: every step rank 0
broadcasts the size in effect (KungFu's ``broadcast``), so all peers resize, or stop, at
the same step.

Records are those of lab.bench.elastic, so ``resize_latencies`` and ``throughput_by_size``
read both engines' runs: a ``step`` record per step with ``size`` and the global ``step``;
rank 0 emits an ``event`` {"name": "discovery", "slots": n} when it asks for size n (with a
timed schedule: when each entry comes due, the first one too), and
every peer of the new cluster an ``event`` {"name": "resize", "old_size", "new_size"}.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from typing import Any

from lab.bench.config import flag
from lab.bench.flags import TrainingConfig
from lab.errors import ParameterError
from lab.metrics.records import emit

BACKEND = "kungfu-elastic"
IMPLEMENTATION = "KungFu elastic (resize through its config server)"


def parse_schedule(text: str) -> dict[int, int]:
    """``"5:2,10:1"`` -> {5: 2, 10: 1}: after global step 5 the size becomes 2, after 10, 1."""
    out: dict[int, int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        step, _, size = item.partition(":")
        if not (step.isdigit() and size.isdigit() and int(size) >= 1):
            raise ParameterError("schedule", text, "STEP:SIZE[,STEP:SIZE...], e.g. '5:2,10:1'")
        out[int(step)] = int(size)
    return out


STOP = 0  # a timed schedule's "stop", as broadcast


def parse_timed_schedule(text: str) -> list[tuple[float, int]]:
    """``"0:1,20:2,50:stop"`` -> [(0.0, 1), (20.0, 2), (50.0, STOP)]; times must increase."""
    out: list[tuple[float, int]] = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        at, _, size = item.partition(":")
        try:
            seconds = float(at)
        except ValueError:
            seconds = -1.0
        ok = size == "stop" or (size.isdigit() and int(size) >= 1)
        if seconds < 0 or not ok or (out and seconds <= out[-1][0]):
            raise ParameterError(
                "timed_schedule", text, "SECONDS:SIZE[,...][,SECONDS:stop], times increasing"
            )
        out.append((seconds, STOP if size == "stop" else int(size)))
    return out


class TimedSchedule:
    """Rank 0's side of a timed schedule: the size in effect (or STOP) at each step, with
    a ``discovery`` record when an entry comes due. The clock starts at the first step."""

    def __init__(self, entries: list[tuple[float, int]], size: int) -> None:
        self.entries, self.size, self.due, self.t0 = entries, size, 0, None

    def want(self) -> int:
        now = time.time()
        self.t0 = now if self.t0 is None else self.t0
        while self.due < len(self.entries) and self.entries[self.due][0] <= now - self.t0:
            self.size = self.entries[self.due][1]
            if self.size != STOP:
                emit("event", name="discovery", rank=0, slots=self.size)
            self.due += 1
        return self.size


def run(cfg: Config, schedule: dict[int, int], timed: list[tuple[float, int]] | None = None) -> int:
    """Train until ``cfg.warmup_steps + cfg.steps`` global steps (or a timed schedule's
    stop); resize as scheduled."""
    from lab.bench.backends import common
    from lab.bench.backends.kungfu import import_kungfu
    from lab.bench.models import build_model, count_params

    tf = common.setup_tensorflow(cfg.threads)
    import_kungfu()
    from kungfu.python import current_cluster_size, current_rank, detached
    from kungfu.tensorflow.initializer import broadcast_variables
    from kungfu.tensorflow.ops import broadcast, resize
    from kungfu.tensorflow.optimizers import SynchronousSGDOptimizer

    common.seed_everything(cfg)
    model = build_model(cfg.model, cfg.image_size, cfg.num_classes)
    opt = SynchronousSGDOptimizer(common.make_optimizer(cfg))
    images, labels = common.make_data(tf, cfg, current_rank())
    step_var = tf.Variable(0, dtype=tf.int64)

    @common.step_function(tf)
    def train_step() -> Any:
        with tf.GradientTape() as tape:
            loss = common.mean_loss(tf, labels, model(images, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @common.step_function(tf)
    def sync() -> None:
        broadcast_variables(model.variables)
        broadcast_variables([step_var])

    @common.step_function(tf)
    def resize_to(n: Any) -> Any:
        return resize(n)

    @common.step_function(tf)
    def agree(n: Any) -> Any:  # rank 0's value, on every peer
        return broadcast(n)

    rank, size = current_rank(), current_cluster_size()
    extra = {**common.versions(tf), "implementation": IMPLEMENTATION}
    rep = common.Reporter(cfg, rank, size, common.device_name(tf), extra=extra)
    rep.header(count_params(model), size=size, schedule=schedule, timed_schedule=timed)
    total = cfg.warmup_steps + cfg.steps
    need_sync = True
    rates: dict[int, list[float]] = {}
    clock = TimedSchedule(timed, size) if timed and rank == 0 else None
    while True:
        if need_sync:  # a new peer gets the model and the step; old peers send them
            sync()
            need_sync = False
        step = int(step_var.numpy())
        if step >= total:
            break
        start = time.perf_counter()
        loss = float(train_step())
        seconds = time.perf_counter() - start
        step_var.assign_add(1)
        rep.step(step, seconds, loss, size=size)
        if step >= cfg.warmup_steps:
            rates.setdefault(size, []).append(cfg.batch_size / seconds)
        if timed:
            want = int(agree(tf.constant(clock.want() if clock else size, tf.int32)))
            if want == STOP:
                break
        else:
            want = schedule.get(step + 1)
        if want is None or want == size:
            continue
        if rank == 0 and not timed:
            emit("event", name="discovery", rank=0, slots=want, step=step + 1)
        changed = bool(resize_to(tf.constant(want, tf.uint32)))
        if detached():
            emit("event", name="detached", rank=rank, step=step + 1)
            break
        if changed:
            old, size, rank = size, current_cluster_size(), current_rank()
            rep.rank, rep.world_size, rep.root = rank, size, rank == 0
            emit("event", name="resize", rank=rank, old_size=old, new_size=size, step=step + 1)
            need_sync = True
    per_size = {str(n): round(sum(v) / len(v), 3) for n, v in sorted(rates.items())}
    rep.summary(img_per_sec_by_size=per_size, final_size=size)
    return 0


@dataclasses.dataclass(frozen=True)
class Config(TrainingConfig):
    """The synthetic workload's training settings and the resize schedule."""

    MODULE = "lab.bench.kungfu_elastic"
    DESCRIPTION = (
        "Synthetic training on KungFu that resizes itself on a schedule; run it under "
        "kungfu-run -w with a config server (the kungfu launcher, elastic=True)."
    )
    BACKEND = "kungfu-elastic"

    batch_size: int = flag(32, "per-peer batch size")
    warmup_steps: int = flag(2, "steps run before timing counts")
    steps: int = flag(20, "global steps (across resizes)")
    schedule: str = flag("", "STEP:SIZE,...: resize after global STEP")
    timed_schedule: str = flag(
        "",
        "SECONDS:SIZE,...[,SECONDS:stop]: seconds since the first step (rank 0's clock); "
        "replaces --schedule",
    )

    def checked(self) -> Config:
        cfg = super().checked()
        if parse_schedule(cfg.schedule) and parse_timed_schedule(cfg.timed_schedule):
            raise ParameterError("timed_schedule", cfg.timed_schedule, "either it or --schedule")
        return cfg


def parse_args(
    argv: Sequence[str] | None = None,
) -> tuple[Config, dict[int, int], list[tuple[float, int]]]:
    """(the checked Config, its step schedule, its timed schedule); a bad flag prints what
    is allowed and exits with 2."""
    cfg = Config.main_config(argv)
    return cfg, parse_schedule(cfg.schedule), parse_timed_schedule(cfg.timed_schedule)


def main(argv: Sequence[str] | None = None) -> int:
    return run(*parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
