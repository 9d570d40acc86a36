"""The lab's re-implementations checked against KungFu itself, on the same task and runs:
the measures and tolerances the KungFu tests (tests/cluster/test_kungfu_real.py,
tests/bench/test_kungfu_workloads.py) share.

Pair averaging: the lab's (MPI one-sided, lab.bench.pair_averaging) and KungFu's
``PairAveragingOptimizer`` (lab.bench.kungfu_regression) train the same least-squares
problem (same per-rank data and batches, plain SGD from w = 0). Peers are picked at random
and interleave differently, so the curves are not equal step by step: the lab's numpy steps
take microseconds, so one rank may run dozens of steps ahead and average with a stale peer
(true asynchrony), while KungFu's steps wait for a network request. The test pads both to
2 ms a step (``--step-time``, a model's pace): unpadded, one lab peer under load could run
all 300 steps against a peer that had not moved. What must agree is where
both settle: the peers' mean evaluation loss over the last fifth of the run.

Gradient noise scale: in one KungFu run (lab.bench.synthetic --backend kungfu-sync
--monitor noise-scale) every measured step feeds the same local and all-reduced gradients
to the lab's estimator (lab.bench.monitors, float64 EMA in Python) and to KungFu's
(``global_noise_scale``, its float32 NoiseScale kernel); the two values per (rank, step)
must agree to float32 precision.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from lab.metrics.records import parse_record
from lab.metrics.store import rank_logs

# The lab's and KungFu's pair averaging: the peers' mean evaluation loss over the last fifth
# of the run may differ by at most this factor (the noise floor is noise^2/2 = 0.005; measured
# on this 2-core machine, 300 steps, seed 5: lab 0.00522 vs KungFu 0.00516, a factor 1.01).
PAIR_AVG_RATIO = 1.5
# The lab's noise scale vs KungFu's on the same gradients: relative difference, per step.
# Both take the same squared norms; the lab keeps its EMA in float64, KungFu in float32
# (measured: at most 5e-6 apart over 2 peers x 5 steps of tiny_cnn).
NOISE_SCALE_RTOL = 1e-3


def run_records(run_dir: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Every ``@lab`` record in a run's per-rank logs."""
    for path in rank_logs(run_dir).values():
        for line in Path(path).read_text(errors="replace").splitlines():
            rec = parse_record(line)
            if rec is not None:
                yield rec


def mean_eval_curve(records: Iterable[Mapping[str, Any]]) -> dict[int, float]:
    """``{step: mean over ranks of eval_loss}`` from step records."""
    sums: dict[int, list[float]] = {}
    for r in records:
        if r.get("kind") == "step" and r.get("eval_loss") is not None:
            sums.setdefault(int(r["step"]), []).append(float(r["eval_loss"]))
    return {s: sum(v) / len(v) for s, v in sorted(sums.items())}


def initial_loss(records: Iterable[Mapping[str, Any]]) -> float:
    """The evaluation loss at w = 0, from a header record."""
    for r in records:
        if r.get("kind") == "header" and r.get("initial_loss") is not None:
            return float(r["initial_loss"])
    raise ValueError("no header record with initial_loss")


def compare_curves(
    lab: Mapping[int, float], kungfu: Mapping[int, float], tail: float = 0.2
) -> dict[str, float]:
    """Where two mean-loss curves settle: their means over the last ``tail`` of the steps
    they share, and the ratio of the larger to the smaller (1.0: equal).

    Returns:
        ``{"steps", "lab_final", "kungfu_final", "ratio"}``.
    """
    common = sorted(set(lab) & set(kungfu))
    if len(common) < 2 or not 0 < tail <= 1:
        raise ValueError("need two shared steps and 0 < tail <= 1")
    late = common[-max(1, int(len(common) * tail)) :]
    a = sum(lab[s] for s in late) / len(late)
    b = sum(kungfu[s] for s in late) / len(late)
    ratio = max(a, b) / min(a, b) if min(a, b) > 0 else math.inf
    return {"steps": len(common), "lab_final": a, "kungfu_final": b, "ratio": ratio}


def noise_scale_pairs(records: Iterable[Mapping[str, Any]]) -> list[tuple[float, float]]:
    """(lab's value, KungFu's value) per (rank, step) where both were reported."""
    by_key: dict[tuple[int, int], dict[str, float]] = {}
    for r in records:
        if r.get("kind") == "metric" and r.get("name") in ("noise_scale", "kungfu_noise_scale"):
            by_key.setdefault((int(r["rank"]), int(r["step"])), {})[r["name"]] = float(r["value"])
    return [
        (v["noise_scale"], v["kungfu_noise_scale"])
        for _, v in sorted(by_key.items())
        if "noise_scale" in v and "kungfu_noise_scale" in v
    ]


def max_relative_difference(pairs: Iterable[tuple[float, float]]) -> float:
    """The largest |a − b| / max(|a|, |b|) over the pairs (0 for two zeros, inf for NaN)."""
    worst = 0.0
    for a, b in pairs:
        if math.isnan(a) or math.isnan(b):
            return math.inf
        denom = max(abs(a), abs(b))
        worst = max(worst, abs(a - b) / denom if denom else 0.0)
    return worst
