"""What every backend shares: TensorFlow set-up, data, optimizer, loss, and the reporting.

Reporting follows DESIGN.md contract 1: ``@lab`` records on stdout (one ``step`` record
per step, flushed at once), plus the human lines of Horovod's synthetic benchmark and
KungFu's monitor lines on stderr, so the lab's parsers read either.
"""

from __future__ import annotations

import functools
import gc
import math
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lab.bench.shares_wait import wait_before_step
from lab.metrics.records import emit

if TYPE_CHECKING:
    from lab.bench.flags import TrainingConfig as Config


# What TensorFlow imports only to accept inputs a lab rank never gives it: pandas (tf_keras's
# data adapter, for DataFrames) and scipy (TF's v1 Keras training loop and tf_keras's image
# preprocessing, for sparse matrices and affine transforms). Both imports are guarded there:
# without them those features are off and nothing else changes. They were 1.4 s of the
# 4.3 s of CPU a rank took to import TensorFlow here, ~3.5 s of every launch on an emulated
# host with 0.4 of a core.
NOT_FOR_RANKS = ("pandas", "scipy")
LEAN_IMPORT_ENV = "DISTLAB_LEAN_TF_IMPORT"  # "1" in ranks the lab launches (lab.cluster.launch)


def skip_imports_ranks_do_not_use() -> None:
    """In a rank the lab launched (``LEAN_IMPORT_ENV`` is "1"), mark NOT_FOR_RANKS not yet
    imported as absent (``sys.modules[name] = None``: importing them raises ImportError).
    Elsewhere (a notebook's kernel, a test) nothing is touched."""
    if os.environ.get(LEAN_IMPORT_ENV) != "1":
        return
    for name in NOT_FOR_RANKS:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


def setup_tensorflow(threads: int = 0) -> Any:
    """Import TensorFlow with tf-keras as its Keras (Horovod's tape breaks under Keras 3),
    without the modules a rank does not use (``skip_imports_ranks_do_not_use``)."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" not in sys.modules:
        skip_imports_ranks_do_not_use()
    try:
        import tensorflow as tf
    except ImportError as exc:  # pragma: no cover - depends on the node
        raise ImportError(
            "TensorFlow is not installed; install it: pip install tensorflow tf-keras"
        ) from exc
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    return tf


def step_function(tf: Any) -> Callable[[Callable[..., Any]], Any]:
    """A decorator: ``tf.function`` without AutoGraph, for steps that branch on Python
    values only (every step here).

    AutoGraph rewrites every Python function the first trace calls, the engines' own
    included: with it, Horovod's DistributedGradientTape made a 2-rank first step take
    3.1 s here, without it 0.6 s (KungFu's 0.73 s became 0.35 s). On an emulated host with
    0.4 of a core that is several seconds of every launch before anything is measured. The
    ops traced are the same, so the steps that are measured are not changed.
    """
    return functools.partial(tf.function, autograph=False)


def state_broadcast(tf: Any, model: Any, opt: Any, broadcast: Callable[[list[Any]], Any]) -> Any:
    """A tf.function that sends rank 0's weights and optimizer slots to every rank with the
    engine's ``broadcast`` (a list of variables -> its op), for after the first step (the
    slots exist only then). A function of its own: as the step's ``first_batch`` argument
    it made TensorFlow trace the whole step twice (~5 s of a 2-rank ResNet-50 warm-up)."""

    @step_function(tf)
    def broadcast_state() -> None:
        broadcast(model.variables)
        slots = opt.variables  # a property in tf-keras, a method in older Keras
        broadcast(slots() if callable(slots) else slots)

    return broadcast_state


def device_name(tf: Any) -> str:
    """``GPU`` when TensorFlow sees one, else ``CPU`` (the word Horovod's lines use)."""
    return "GPU" if tf.config.list_physical_devices("GPU") else "CPU"


def pin_gpu(tf: Any, local_rank: int) -> None:
    """One GPU per rank, as Horovod's examples do; a no-op on CPU nodes."""
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.set_visible_devices(gpus[local_rank % len(gpus)], "GPU")


def seed_everything(cfg: Config) -> None:
    """Same model initialisation on every rank (the seed), before the model is built."""
    import tf_keras

    tf_keras.utils.set_random_seed(cfg.seed)


def make_data(tf: Any, cfg: Config, rank: Any) -> tuple[Any, Any]:
    """One batch of random images in [0, 1) and labels, seeded per rank so ranks differ.

    ``rank`` may be a Python int or an integer tensor (a ps worker's index in a graph).
    """
    shape = [cfg.batch_size, cfg.image_size, cfg.image_size, 3]
    rank = tf.cast(rank, tf.int64)
    seed = tf.constant(cfg.seed, tf.int64)
    images = tf.random.stateless_uniform(shape, seed=tf.stack([seed, 2 * rank]))
    labels = tf.random.stateless_uniform(
        [cfg.batch_size],
        seed=tf.stack([seed, 2 * rank + 1]),
        maxval=cfg.num_classes,
        dtype=tf.int64,
    )
    return images, labels


def make_optimizer(cfg: Config) -> Any:
    """The tf-keras optimizer named by ``--optimizer`` (momentum is SGD with 0.9)."""
    import tf_keras

    if cfg.optimizer == "adam":
        return tf_keras.optimizers.Adam(cfg.lr)
    return tf_keras.optimizers.SGD(cfg.lr, momentum=0.9 if cfg.optimizer == "momentum" else 0.0)


def mean_loss(tf: Any, labels: Any, logits: Any) -> Any:
    """Mean softmax cross-entropy over the local batch."""
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    )


def versions(tf: Any) -> dict[str, str]:
    """Versions for the header record."""
    out = {"tf": tf.__version__}
    try:
        import tf_keras

        out["keras"] = tf_keras.__version__
    except ImportError:  # pragma: no cover
        pass
    return out


def throughput_stats(rates: list[float]) -> tuple[float, float]:
    """Mean and Horovod's ±: 1.96 × the (population) standard deviation."""
    if not rates:
        return float("nan"), float("nan")
    mean = sum(rates) / len(rates)
    std = math.sqrt(sum((r - mean) ** 2 for r in rates) / len(rates))
    return mean, 1.96 * std


@dataclass
class Reporter:
    """Prints one rank's records and human lines.

    Args:
        cfg: the workload's parameters.
        rank: the rank the records describe.
        world_size: number of training ranks (workers).
        device: ``CPU`` or ``GPU``.
        root: whether this process prints the run's totals (rank 0 or the ps chief).
        iter_lines: print Horovod's per-step ``Iter`` line (off where one process reports
            for several ranks, as the ps chief does: the lines would not say whose).
    """

    cfg: Config
    rank: int
    world_size: int
    device: str
    root: bool = True
    iter_lines: bool = True
    rates: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def header(self, params: int, **more: Any) -> None:
        emit(
            "header",
            rank=self.rank,
            world_size=self.world_size,
            params=params,
            device=self.device,
            **self.cfg.described(),
            host=socket.gethostname(),
            pid=os.getpid(),
            versions=rank_versions(),  # where the rank ran, not the launching machine
            **self.extra,
            **more,
        )

    def step(self, step: int, seconds: float, loss: float | None, **more: Any) -> None:
        """One step record; timed (non-warmup) steps also print Horovod's ``Iter`` line."""
        warmup = step < self.cfg.warmup_steps
        rank = more.pop("rank", self.rank)
        emit(
            "step",
            rank=rank,
            step=step,
            samples=self.cfg.batch_size,
            seconds=round(seconds, 6),
            warmup=warmup,
            loss=None if loss is None else round(float(loss), 6),
            **more,
        )
        if not warmup and seconds > 0:
            rate = self.cfg.batch_size / seconds
            self.rates.append(rate)
            if not self.iter_lines:
                return
            print(
                f"Iter #{step - self.cfg.warmup_steps}: {rate:.1f} img/sec per {self.device}",
                flush=True,
            )

    def metric(self, name: str, value: float, step: int) -> None:
        """A monitor value: a record on stdout and KungFu's line on stderr."""
        emit("metric", rank=self.rank, name=name, value=float(value), step=step)
        label = "Gradient Noise Scale" if name == "noise_scale" else "Variance"
        print(f"{label}: {value:.9g}", file=sys.stderr, flush=True)

    def summary(self, rates: list[float] | None = None, **more: Any) -> None:
        """The run's throughput; totals (and Horovod's two closing lines) on the root only."""
        mean, ci95 = throughput_stats(self.rates if rates is None else rates)
        total = mean * self.world_size
        emit(
            "summary",
            rank=self.rank,
            world_size=self.world_size,
            img_per_sec=round(mean, 3),
            ci95=round(ci95, 3),
            total=round(total, 3),
            steps=len(self.rates if rates is None else rates),
            unit="img/sec per rank",
            **more,
        )
        if self.root:
            d, n = self.device, self.world_size
            print(f"Img/sec per {d}: {mean:.1f} +-{ci95:.1f}", flush=True)
            print(f"Total img/sec on {n} {d}(s): {total:.1f} +-{ci95 * n:.1f}", flush=True)


StepFn = Callable[[int], tuple[Any, dict[str, Any]]]


def run_loop(
    cfg: Config,
    reporter: Reporter,
    step_fn: StepFn,
    on_metrics: Callable[..., None] | None = None,
    tags: Callable[[int], Mapping[str, Any]] | None = None,
) -> None:
    """Run warm-up and timed steps, one record each, then the summary.

    Args:
        cfg: the workload's parameters.
        reporter: where records go.
        step_fn: runs step ``i`` to completion; returns (loss tensor, monitor outputs).
        on_metrics: called with (step, monitor outputs) after a step that returned any.
        tags: more fields for step ``i``'s record (e.g. its phase, lab.bench.alternation).

    Before the first timed step the garbage of warm-up (traces) is collected and what is
    left is frozen (``gc.freeze``), so that no full collection of TensorFlow's objects
    lands in a timed step: on this CPU one took 0.15-0.25 s, four 50-ms steps, and it
    fell on the same step of every run of a point (the ``gc_frozen`` event says when).
    On an emulated host that starts at full speed the rank also waits there for its CPU
    share (lab.bench.shares_wait), once a step record is out: after step 0 when no step
    is warm-up.
    """
    for i in range(cfg.warmup_steps + cfg.steps):
        if i == cfg.warmup_steps:
            freeze_garbage(reporter.rank)
        wait_before_step(i, cfg.warmup_steps, reporter.rank)
        start = time.perf_counter()
        loss, outputs = step_fn(i)
        loss = float(loss)  # waits for the step to finish
        seconds = time.perf_counter() - start
        reporter.step(i, seconds, loss, **(tags(i) if tags is not None else {}))
        if outputs and on_metrics is not None:
            on_metrics(i, outputs)
    reporter.summary()


def freeze_garbage(rank: int, **fields: Any) -> None:
    """Collect the garbage so far and exclude what survives from later collections;
    an ``event`` ``gc_frozen`` records the objects collected and the seconds it took
    (with ``fields``, e.g. the seed whose timed steps follow)."""
    start = time.perf_counter()
    collected = gc.collect()
    gc.freeze()
    seconds = round(time.perf_counter() - start, 6)
    emit("event", name="gc_frozen", rank=rank, collected=collected, seconds=seconds, **fields)


def rank_versions() -> dict[str, str | None]:
    """Python's and the engines' versions as installed where this rank runs (read from
    package metadata: cheap, imports nothing)."""
    import importlib.metadata
    import platform

    out: dict[str, str | None] = {"python": platform.python_version()}
    for dist in ("tensorflow", "tf-keras", "horovod", "torch", "kungfu", "mpi4py"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out
