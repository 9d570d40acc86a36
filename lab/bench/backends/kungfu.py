"""KungFu's own engine (``kungfu-run -np N python -m lab.bench.synthetic --backend kungfu-sync``):
synchronous SGD (``SynchronousSGDOptimizer``) or asynchronous pair averaging
(``PairAveragingOptimizer``), as benchmark_kungfu.py of the KungFu artifact.

KungFu needs its own build (env/build_kungfu.sh, run by ``make setup``); where ``import
kungfu`` fails the run exits 2 saying how to install it. With ``--monitor`` on
``kungfu-sync``, gradients are all-reduced with KungFu's ``group_all_reduce`` and the lab's
estimators run on them; for the noise scale KungFu's own estimator (its ``NoiseScale``
kernel behind ``global_noise_scale``) runs on the same fused gradients too, and both are
reported (``noise_scale``: the lab's, ``kungfu_noise_scale``: KungFu's), so the lab's
monitor is checked against the original on every measured step.

``kungfu-monitor`` is KungFu's monitoring as its users run it (KungFu OSDI'20 Fig 8, the
artifact's monitoring benchmark): synchronous SGD through KungFu's own
``MonitorGradientNoiseScaleOptimizer`` (``verbose``: it prints ``Gradient Noise Scale: X``)
or ``MonitorGradientVarianceOptimizer`` (``Variance: X``) every ``--interval`` steps;
without ``--monitor``, the same ``SynchronousSGDOptimizer`` as ``kungfu-sync``, so the
overhead is measured against KungFu's own baseline. With ``--alternate K`` one run holds
both: every K timed steps it switches between the monitored optimizer and the plain one
(lab.bench.alternation), each step record tagged with its ``phase``.

At the end every peer emits an ``event`` "weights" with a digest of its trainable weights:
synchronous peers must agree.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from lab.bench import alternation, monitors
from lab.bench.backends import EngineUnavailable, common
from lab.bench.models import build_model, count_params
from lab.errors import ParameterError
from lab.metrics.records import emit

if TYPE_CHECKING:
    from lab.bench.synthetic import Config

INSTALL = (
    "KungFu is not installed on this node; install it: make setup (env/build_kungfu.sh builds "
    "KungFu b1e1768 with the lab's patches; needs Go and a C++ compiler)"
)


def import_kungfu() -> Any:
    """The ``kungfu`` package, or EngineUnavailable with the install command."""
    try:
        import kungfu
    except ImportError as exc:
        raise EngineUnavailable(INSTALL) from exc
    return kungfu


def run(cfg: Config) -> int:
    import_kungfu()
    tf = common.setup_tensorflow(cfg.threads)
    try:
        from kungfu.python import (
            current_cluster_size,
            current_local_rank,
            current_rank,
            run_barrier,
        )
        from kungfu.tensorflow.initializer import broadcast_variables
        from kungfu.tensorflow.ops import fuse, global_noise_scale, group_all_reduce
        from kungfu.tensorflow.optimizers import (
            MonitorGradientNoiseScaleOptimizer,
            MonitorGradientVarianceOptimizer,
            PairAveragingOptimizer,
            SynchronousSGDOptimizer,
        )
    except ImportError as exc:
        raise EngineUnavailable(f"{INSTALL} (import failed: {exc})") from exc

    rank, size = current_rank(), current_cluster_size()
    if cfg.monitor != "none" and size < 2:
        raise ParameterError("np", size, f"at least 2 ranks for --monitor {cfg.monitor}")
    common.pin_gpu(tf, current_local_rank())
    common.seed_everything(cfg)
    model = build_model(cfg.model, cfg.image_size, cfg.num_classes)
    base = common.make_optimizer(cfg)
    own_monitor = cfg.backend == "kungfu-monitor" and cfg.monitor != "none"
    if cfg.backend == "kungfu-async":
        opt = PairAveragingOptimizer(base)
    elif own_monitor and cfg.monitor == "noise-scale":
        opt = MonitorGradientNoiseScaleOptimizer(
            base, cfg.batch_size, monitor_interval=cfg.interval, verbose=True
        )
    elif own_monitor:
        opt = MonitorGradientVarianceOptimizer(base, monitor_interval=cfg.interval)
    elif cfg.monitor == "none":
        opt = SynchronousSGDOptimizer(base)
    else:
        opt = base  # the step all-reduces itself, to see the local gradients too
    images, labels = common.make_data(tf, cfg, rank)
    b_small, b_big = float(cfg.batch_size), float(cfg.batch_size * size)

    def average(grads: list[Any]) -> list[Any]:
        return [g / size for g in group_all_reduce(grads)]

    def make_train_step(opt: Any) -> Any:
        @common.step_function(tf)
        def train_step(measure: bool) -> Any:
            with tf.GradientTape() as tape:
                loss = common.mean_loss(tf, labels, model(images, training=True))
            variables = model.trainable_variables
            grads = tape.gradient(loss, variables)
            outputs: dict[str, Any] = {}
            if cfg.monitor != "none" and not own_monitor:
                local, grads = grads, average(grads)
                if measure:
                    outputs = monitors.tf_measure(
                        cfg.monitor, local, grads, average, b_small, b_big
                    )
                if measure and cfg.monitor == "noise-scale":  # what KungFu's optimizer fuses
                    outputs["kungfu"] = (fuse(local), fuse(grads))
            opt.apply_gradients(zip(grads, variables, strict=True))
            return loss, outputs

        broadcast_state = common.state_broadcast(tf, model, opt, broadcast_variables)

        def step(first_batch: bool, measure: bool) -> Any:
            out = train_step(measure)
            if first_batch:
                broadcast_state()
            return out

        return step

    train_step = make_train_step(opt)
    # --alternate: the same synchronous SGD without the monitor, on the same base optimizer
    plain_step = make_train_step(SynchronousSGDOptimizer(base)) if cfg.alternate else None
    traced: set[str] = set()  # phases whose step function has run (its first batch broadcasts)

    @common.step_function(tf)
    def kungfu_noise_scale(fused_local: Any, fused_avg: Any) -> Any:
        # Its own function: the NoiseScale kernel keeps its EMA per op instance, and
        # train_step is traced more than once (measured or not).
        return global_noise_scale(b_small, b_big, fused_local, fused_avg, monitors.DEFAULT_ALPHA)

    def phase_of(i: int) -> str:
        return alternation.phase(i, cfg.warmup_steps, cfg.alternate) if cfg.alternate else ""

    def step_fn(i: int) -> tuple[Any, dict[str, Any]]:
        measure = cfg.monitor != "none" and not own_monitor and i % cfg.interval == 0
        phase = phase_of(i)
        first = phase not in traced
        traced.add(phase)
        if plain_step is not None and phase == alternation.OFF:
            return plain_step(first, False)
        return train_step(first, measure)

    rep = common.Reporter(
        cfg, rank, size, common.device_name(tf), root=rank == 0, extra=common.versions(tf)
    )
    rep.header(count_params(model))
    sink = monitors.MonitorSink(rep.metric)

    def on_metrics(step: int, outputs: dict[str, Any]) -> None:
        if "kungfu" in outputs:
            value = float(kungfu_noise_scale(*outputs.pop("kungfu")))
            emit("metric", rank=rank, name="kungfu_noise_scale", value=value, step=step)
        sink(step, outputs)

    tags = (lambda i: {"phase": phase_of(i)}) if cfg.alternate else None
    common.run_loop(cfg, rep, step_fn, on_metrics, tags)
    run_barrier()  # pair averaging: no peer leaves while another may still request its model
    # trainable weights only: batch norm's moving statistics are each rank's own (small_cnn)
    digest = weights_digest(model.trainable_variables)
    emit("event", name="weights", rank=rank, digest=digest)
    return 0


def weights_digest(variables: list[Any]) -> str:
    """A short hash of the model's values: equal on every peer after synchronous steps."""
    h = hashlib.sha256()
    for v in variables:
        h.update(v.numpy().tobytes())
    return h.hexdigest()[:16]
