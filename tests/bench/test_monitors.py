"""KungFu's monitors: the estimators against numpy and against a problem with a known answer."""

from __future__ import annotations

import numpy as np
import pytest

from lab.bench import monitors


def linear_regression_grads(rng, trials, workers, b_small, d, sigma):
    """Per-worker mean gradients of ½(x·w − y)² at w = w* + d, x ~ N(0, I), noise σ.

    Returns an array (trials, workers, n).
    """
    n = d.size
    x = rng.standard_normal((trials, workers, b_small, n))
    eps = sigma * rng.standard_normal((trials, workers, b_small))
    residual = x @ d - eps  # (trials, workers, b_small)
    return np.mean(x * residual[..., None], axis=2)


def test_noise_scale_is_unbiased_on_linear_regression():
    # For x ~ N(0, I_n): G = d and Σ = d dᵀ + (|d|² + σ²) I, so
    # tr(Σ)/|G|² = 1 + n + n σ²/|d|² (Isserlis' theorem on E[(xᵀd)² x xᵀ]).
    rng = np.random.default_rng(3)  # a statistical test: one fixed draw, reproducible
    n, sigma, workers, b_small = 8, 0.5, 4, 16
    d = rng.standard_normal(n)
    d /= np.linalg.norm(d)
    true_g_sq = 1.0
    true_trace = 1.0 + n * (1.0 + sigma**2)
    true_noise_scale = true_trace / true_g_sq  # 11.0

    grads = linear_regression_grads(rng, 6000, workers, b_small, d, sigma)
    avg = grads.mean(axis=1)
    b_big = b_small * workers
    terms = np.array(
        [monitors.noise_scale_np([grads[t, 0]], [avg[t]], b_small, b_big) for t in range(len(avg))]
    )
    g_sq, s = terms[:, 0], terms[:, 1]
    for est, truth in ((g_sq, true_g_sq), (s, true_trace)):
        stderr = est.std(ddof=1) / np.sqrt(len(est))
        assert abs(est.mean() - truth) < 5 * stderr + 1e-9, (est.mean(), truth, stderr)
    assert s.mean() / g_sq.mean() == pytest.approx(true_noise_scale, rel=0.15)

    ema = monitors.NoiseScaleEMA(alpha=0.998)  # KungFu's alpha weighs the past: a long mean
    for a, b in terms:
        value = ema.update(a, b)
    assert value == pytest.approx(true_noise_scale, rel=0.35)


def test_noise_scale_terms_formula_and_checks():
    g_sq, s = monitors.noise_scale_terms(g_small_sq=3.0, g_big_sq=2.0, b_small=2, b_big=8)
    assert g_sq == pytest.approx((8 * 2.0 - 2 * 3.0) / 6)
    assert s == pytest.approx((3.0 - 2.0) / (1 / 2 - 1 / 8))
    with pytest.raises(ValueError):
        monitors.noise_scale_terms(1.0, 1.0, b_small=4, b_big=4)


def test_ema_follows_kungfu_rule():
    ema = monitors.NoiseScaleEMA(alpha=0.6)
    assert np.isnan(ema.value)
    assert ema.update(2.0, 10.0) == pytest.approx(5.0)  # first value taken as is
    g = 0.6 * 2.0 + 0.4 * 4.0  # alpha weighs the running value (kungfu/ema.hpp)
    s = 0.6 * 10.0 + 0.4 * 4.0
    assert ema.update(4.0, 4.0) == pytest.approx(s / g)
    with pytest.raises(ValueError):
        monitors.NoiseScaleEMA(alpha=0.0)


def test_variance_by_hand():
    w0 = [np.array([1.0, 3.0]), np.array([[0.0]])]
    w1 = [np.array([3.0, 5.0]), np.array([[2.0]])]
    # tensor 1: mean [2, 4], mean of squares [5, 17] -> var [1, 1], norm √2
    # tensor 2: mean 1, mean of squares 2 -> var 1, norm 1
    assert monitors.variance_np([w0, w1]) == pytest.approx(np.sqrt(2) + 1)
    assert monitors.variance_np([w0, w0]) == pytest.approx(0.0)


def test_monitor_sink_emits_ema_and_variance():
    seen = []
    sink = monitors.MonitorSink(lambda name, value, step: seen.append((name, value, step)))
    sink(0, {"g_sq": 2.0, "s": 10.0})
    sink(3, {"variance": 0.25})
    sink(4, {})
    assert seen == [("noise_scale", 5.0, 0), ("variance", 0.25, 3)]


@pytest.mark.slow
def test_tensorflow_estimators_match_numpy():
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(7)
    shapes = [(3, 3, 4, 8), (8,), (10, 5)]
    workers, b_small = 3, 16
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(workers)]
    avg = [np.mean([g[i] for g in grads], axis=0) for i in range(len(shapes))]
    b_big = b_small * workers

    g_sq, s = monitors.tf_noise_scale_terms(
        [tf.constant(g) for g in grads[0]], [tf.constant(a) for a in avg], b_small, b_big
    )
    ref_g_sq, ref_s = monitors.noise_scale_np(grads[0], avg, b_small, b_big)
    # |G|² is a small difference of two large float32 sums of squares: TF's rounding is
    # relative to those terms, not to |G|² (worst over 200 draws: 9e-8 of them; an
    # unseeded draw once missed rel=1e-4 of |G|² itself)
    terms = (b_big * monitors.squared_norm(avg) + b_small * monitors.squared_norm(grads[0])) / (
        b_big - b_small
    )
    assert abs(float(g_sq) - ref_g_sq) <= 1e-6 * terms
    assert float(s) == pytest.approx(ref_s, rel=1e-4)

    others = [[np.square(g[i]) for i in range(len(shapes))] for g in grads[1:]]

    def average(local_sq):  # what the all-reduce-mean of g² gives on worker 0
        return [(t + sum(o[i] for o in others)) / workers for i, t in enumerate(local_sq)]

    out = monitors.tf_measure(
        "variance",
        [tf.constant(g) for g in grads[0]],
        [tf.constant(a) for a in avg],
        average,
        b_small,
        b_big,
    )
    assert float(out["variance"]) == pytest.approx(monitors.variance_np(grads), rel=1e-4)
    out = monitors.tf_measure("noise-scale", grads[0], avg, average, b_small, b_big)
    assert float(out["s"]) == pytest.approx(ref_s, rel=1e-4)
