"""Synchronous SGD with Horovod's all-reduce, in the shape of Horovod's TF2 synthetic
benchmark: ``hvd.init()``, one tf.function step with ``hvd.DistributedGradientTape``, and
the variables broadcast from rank 0 after the first step (so the optimizer's slots exist),
by a function of their own so that the step is traced once.

With ``--monitor`` the step needs the rank's local gradients as well as the averaged ones,
so it takes them from a plain tape and issues the all-reduce itself: one
``hvd.allreduce(g, op=hvd.Average)`` per tensor, which is what DistributedGradientTape does
by default. Monitored steps (every ``--interval``) add KungFu's estimators (see
lab.bench.monitors); variance costs one more all-reduce of g².
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lab.bench import monitors
from lab.bench.backends import EngineUnavailable, common
from lab.bench.models import build_model, count_params
from lab.errors import ParameterError

if TYPE_CHECKING:
    from lab.bench.synthetic import Config


def import_horovod() -> Any:
    """``horovod.tensorflow``, or EngineUnavailable saying how to install it."""
    try:
        import horovod.tensorflow as hvd
    except ImportError as exc:
        raise EngineUnavailable(
            f"Horovod is not installed on this node ({exc}); install it: "
            "HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 pip install horovod==0.28.1"
        ) from exc
    return hvd


def run(cfg: Config) -> int:
    tf = common.setup_tensorflow(cfg.threads)
    hvd = import_horovod()
    hvd.init()
    common.pin_gpu(tf, hvd.local_rank())
    rank, size = hvd.rank(), hvd.size()
    if cfg.monitor != "none" and size < 2:
        raise ParameterError("np", size, f"at least 2 ranks for --monitor {cfg.monitor}")
    common.seed_everything(cfg)
    model = build_model(cfg.model, cfg.image_size, cfg.num_classes)
    opt = common.make_optimizer(cfg)
    images, labels = common.make_data(tf, cfg, rank)
    b_small, b_big = float(cfg.batch_size), float(cfg.batch_size * size)

    def average(grads: list[Any]) -> list[Any]:
        return [hvd.allreduce(g, op=hvd.Average) for g in grads]

    @common.step_function(tf)
    def train_step(measure: bool) -> Any:
        with tf.GradientTape() as tape:
            loss = common.mean_loss(tf, labels, model(images, training=True))
        variables = model.trainable_variables
        outputs: dict[str, Any] = {}
        if cfg.monitor == "none":
            grads = hvd.DistributedGradientTape(tape).gradient(loss, variables)
        else:
            local = tape.gradient(loss, variables)
            grads = average(local)
            if measure:
                outputs = monitors.tf_measure(cfg.monitor, local, grads, average, b_small, b_big)
        opt.apply_gradients(zip(grads, variables, strict=True))
        return loss, outputs

    broadcast_state = common.state_broadcast(
        tf, model, opt, lambda variables: hvd.broadcast_variables(variables, root_rank=0)
    )

    def step_fn(i: int) -> tuple[Any, dict[str, Any]]:
        out = train_step(cfg.monitor != "none" and i % cfg.interval == 0)
        if i == 0:
            broadcast_state()
        return out

    extra = {**common.versions(tf), "horovod": _version()}
    rep = common.Reporter(cfg, rank, size, common.device_name(tf), root=rank == 0, extra=extra)
    rep.header(count_params(model), controller=_controller(hvd))
    common.run_loop(cfg, rep, step_fn, monitors.MonitorSink(rep.metric))
    hvd.shutdown()
    return 0


def _version() -> str:
    try:
        import horovod

        return str(horovod.__version__)
    except (ImportError, AttributeError):  # pragma: no cover
        return "unknown"


def _controller(hvd: Any) -> str:
    """Which controller this Horovod runs with (Gloo or MPI)."""
    try:
        if hvd.gloo_enabled():
            return "gloo"
        return "mpi" if hvd.mpi_enabled() else "unknown"
    except Exception:  # pragma: no cover - older Horovod
        return "unknown"
