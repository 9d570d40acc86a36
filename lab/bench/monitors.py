"""KungFu's online training monitors (KungFu OSDI'20, Fig 8), computed inside the ranks.

Gradient noise scale (McCandlish et al., "An Empirical Model of Large-Batch Training",
appendix A.1): every rank has its local gradient G_small (batch B_small, the per-rank
batch) and the all-reduced gradient G_big (B_big = B_small × world size). Because
E|G_B|² = |G|² + tr(Σ)/B, two batch sizes give unbiased estimates of the true gradient's
squared norm and of the noise tr(Σ):

    |G|² ≈ (B_big·|G_big|² − B_small·|G_small|²) / (B_big − B_small)
    S    ≈ (|G_small|² − |G_big|²) / (1/B_small − 1/B_big)

Each estimate is smoothed with its own exponential moving average and the noise scale is
B_noise = EMA(S) / EMA(|G|²), as KungFu's ``NoiseScale`` kernel does (kungfu/ema.hpp: the
first value is taken as is, then ``alpha·ema + (1 − alpha)·x``: alpha weighs the past; checked
against the kernel itself in tests/cluster/test_kungfu_real.py). KungFu uses the rank's
own local gradient, so every rank prints its own estimate.

Gradient variance across workers (KungFu's ``MonitorGradientVarianceOptimizer``): one
extra all-reduce of g², Var = mean_w(g²) − (mean_w g)² per element, reported as the sum
over tensors of ‖Var‖₂.

The numpy functions are the reference; the ``tf_*`` functions are what ranks run inside
their training step (TensorFlow is imported only when they are called).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# KungFu's global_noise_scale op defaults to alpha=0.6 (kungfu/tensorflow/ops/monitor.py).
DEFAULT_ALPHA = 0.6


def noise_scale_terms(
    g_small_sq: float, g_big_sq: float, b_small: float, b_big: float
) -> tuple[float, float]:
    """Unbiased |G|² and S = tr(Σ) from squared gradient norms at two batch sizes.

    Args:
        g_small_sq: |G_small|², the squared norm of the gradient of a batch of ``b_small``.
        g_big_sq: |G_big|², the same for a batch of ``b_big`` (> ``b_small``).
        b_small: the small batch size (per-rank batch).
        b_big: the big batch size (global batch).

    Returns:
        (|G|² estimate, S estimate); either may be negative on a noisy step.
    """
    if not b_big > b_small > 0:
        raise ValueError(f"need b_big > b_small > 0, got b_small={b_small}, b_big={b_big}")
    g_sq = (b_big * g_big_sq - b_small * g_small_sq) / (b_big - b_small)
    s = (g_small_sq - g_big_sq) / (1.0 / b_small - 1.0 / b_big)
    return float(g_sq), float(s)


def squared_norm(grads: Sequence[Any]) -> float:
    """|g|² of a list of tensors taken as one flat vector (KungFu fuses them first)."""
    return float(sum(np.sum(np.square(np.asarray(g, dtype=np.float64))) for g in grads))


def noise_scale_np(
    local_grads: Sequence[Any], avg_grads: Sequence[Any], b_small: float, b_big: float
) -> tuple[float, float]:
    """Reference for ``tf_noise_scale_terms``: (|G|², S) from one rank's gradients."""
    return noise_scale_terms(squared_norm(local_grads), squared_norm(avg_grads), b_small, b_big)


def variance_np(worker_grads: Sequence[Sequence[Any]]) -> float:
    """Reference gradient variance: sum over tensors of ‖mean_w(g²) − (mean_w g)²‖₂.

    Args:
        worker_grads: one list of gradient tensors per worker, same shapes in each.
    """
    total = 0.0
    for tensors in zip(*worker_grads, strict=True):
        stack = np.stack([np.asarray(t, dtype=np.float64) for t in tensors])
        var = np.mean(np.square(stack), axis=0) - np.square(np.mean(stack, axis=0))
        total += float(np.linalg.norm(var.ravel()))
    return total


@dataclass
class NoiseScaleEMA:
    """KungFu's smoothing: one EMA for |G|², one for S, noise scale = EMA(S) / EMA(|G|²)."""

    alpha: float = DEFAULT_ALPHA
    g_sq: float | None = field(default=None, init=False)
    s: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {self.alpha}")

    def update(self, g_sq: float, s: float) -> float:
        """Fold in one step's estimates; returns the smoothed noise scale B_noise."""
        a = self.alpha  # KungFu's rule: alpha weighs the running value, not the new one
        self.g_sq = g_sq if self.g_sq is None else a * self.g_sq + (1 - a) * g_sq
        self.s = s if self.s is None else a * self.s + (1 - a) * s
        return self.value

    @property
    def value(self) -> float:
        if self.g_sq is None or self.s is None:
            return float("nan")
        return self.s / self.g_sq if self.g_sq != 0 else float("inf")


def tf_squared_norm(grads: Sequence[Any]) -> Any:
    """|g|² of a list of tensors as one float32 scalar tensor."""
    import tensorflow as tf

    return tf.add_n([tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g in grads])


def tf_noise_scale_terms(
    local_grads: Sequence[Any], avg_grads: Sequence[Any], b_small: float, b_big: float
) -> tuple[Any, Any]:
    """(|G|², S) as scalar tensors, from a rank's local and all-reduced (mean) gradients."""
    if not b_big > b_small > 0:
        raise ValueError(f"need b_big > b_small > 0, got b_small={b_small}, b_big={b_big}")
    g_small_sq = tf_squared_norm(local_grads)
    g_big_sq = tf_squared_norm(avg_grads)
    g_sq = (b_big * g_big_sq - b_small * g_small_sq) / (b_big - b_small)
    s = (g_small_sq - g_big_sq) / (1.0 / b_small - 1.0 / b_big)
    return g_sq, s


def tf_variance(avg_grads: Sequence[Any], avg_sq_grads: Sequence[Any]) -> Any:
    """Sum over tensors of ‖mean_w(g²) − (mean_w g)²‖₂, from the two all-reduced means."""
    import tensorflow as tf

    norms = [
        tf.norm(tf.reshape(tf.cast(sq, tf.float32) - tf.square(tf.cast(g, tf.float32)), [-1]))
        for g, sq in zip(avg_grads, avg_sq_grads, strict=True)
    ]
    return tf.add_n(norms)


def tf_measure(
    kind: str,
    local_grads: Sequence[Any],
    avg_grads: Sequence[Any],
    average: Any,
    b_small: float,
    b_big: float,
) -> dict[str, Any]:
    """The monitor's tensors for one step, inside a rank's training step.

    Args:
        kind: ``"noise-scale"`` or ``"variance"``.
        local_grads: this rank's gradients.
        avg_grads: the all-reduced mean gradients.
        average: the engine's all-reduce-mean of a list of tensors (variance uses it once
            more, on g²).
        b_small: per-rank batch size.
        b_big: global batch size.

    Returns:
        ``{"g_sq", "s"}`` for the noise scale, ``{"variance"}`` for the variance.
    """
    import tensorflow as tf

    if kind == "noise-scale":
        g_sq, s = tf_noise_scale_terms(local_grads, avg_grads, b_small, b_big)
        return {"g_sq": g_sq, "s": s}
    if kind == "variance":
        mean_sq = average([tf.square(g) for g in local_grads])
        return {"variance": tf_variance(avg_grads, mean_sq)}
    raise ValueError(f"unknown monitor {kind!r}; known: noise-scale, variance")


class MonitorSink:
    """Turns a step's monitor tensors into records and KungFu's lines (EMA for the noise scale).

    Args:
        emit_metric: ``(name, value, step) -> None``, e.g. ``Reporter.metric``.
        alpha: the noise scale's EMA factor.
    """

    def __init__(self, emit_metric: Any, alpha: float = DEFAULT_ALPHA) -> None:
        self._emit = emit_metric
        self.ema = NoiseScaleEMA(alpha)

    def __call__(self, step: int, outputs: dict[str, Any]) -> None:
        if "variance" in outputs:
            self._emit("variance", float(outputs["variance"]), step)
        elif "g_sq" in outputs:
            value = self.ema.update(float(outputs["g_sq"]), float(outputs["s"]))
            self._emit("noise_scale", value, step)
