"""A training task whose gradient noise scale grows as the loss falls: softmax regression
taught by a softmax teacher, on fresh samples every step.

KungFu's adaptive batch (OSDI'20, Fig 4 and its noise-scale policy) rests on McCandlish et
al., "An Empirical Model of Large-Batch Training" (arXiv:1812.06162, 2018): the noise scale
B_noise = tr(Σ) / |G|² is small while the mean gradient G is large and grows as training
approaches a minimum, where G shrinks and the per-sample noise Σ does not. Here labels are
drawn from a teacher's softmax (so even the teacher's own loss, the optimum, is above zero
and per-sample gradients stay noisy there) and every step draws new samples (no finite
training set to overfit): as the student nears the teacher, |G|² falls towards zero while
tr(Σ) tends to the Fisher information's trace, so B_noise grows by more than an order of
magnitude within two hundred steps (about 30× in the Fig 4 smoke runs). The optimum is
known: the teacher's loss on the evaluation set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

EVAL_SAMPLES = 2048


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class TeacherTask:
    """The teacher (features × classes weights), the shared evaluation set, its optimum."""

    w_teacher: np.ndarray
    x_eval: np.ndarray
    y_eval: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return self.w_teacher.shape  # type: ignore[return-value]

    @property
    def optimum_loss(self) -> float:
        """The teacher's own cross-entropy on the evaluation set: no student does better
        in expectation."""
        return self.eval_loss(self.w_teacher)

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` fresh samples: x standard normal, y drawn from the teacher's softmax."""
        x = rng.standard_normal((n, self.shape[0])).astype(np.float32)
        p = softmax(x @ self.w_teacher)
        y = (p.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
        return x, y

    def loss_and_grad(
        self, w: np.ndarray, x: np.ndarray, y: np.ndarray
    ) -> tuple[float, np.ndarray]:
        """Mean cross-entropy of the student ``w`` on (x, y) and its gradient."""
        n = len(y)
        p = softmax(x @ w)
        rows = np.arange(n)
        loss = float(-np.mean(np.log(p[rows, y] + 1e-12)))
        p[rows, y] -= 1.0
        return loss, (x.T @ p / n).astype(np.float32)

    def eval_loss(self, w: np.ndarray) -> float:
        p = softmax(self.x_eval @ w)
        return float(-np.mean(np.log(p[np.arange(len(self.y_eval)), self.y_eval] + 1e-12)))


def make_task(seed: int, features: int, classes: int, temperature: float) -> TeacherTask:
    """The same teacher and evaluation set on every rank (seeded by ``seed``); the
    teacher's logits have standard deviation about ``temperature`` (larger: more certain
    labels, a lower optimum)."""
    rng = np.random.default_rng([seed, 0])
    w = rng.standard_normal((features, classes)) * (temperature / math.sqrt(features))
    task = TeacherTask(w.astype(np.float32), np.zeros((0, features), np.float32), np.zeros(0))
    x, y = task.sample(rng, EVAL_SAMPLES)
    return TeacherTask(task.w_teacher, x, y)
