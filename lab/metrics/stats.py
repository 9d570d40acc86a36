"""What the numbers of a run mean: throughput with confidence intervals, scaling, overhead.

Every estimate carries its 95% confidence half-width so that a figure's error bar and a
notebook's verdict ("overhead 3.1% ± 0.8%") come from the same place. Means use the
t-distribution (scipy when installed, else the normal approximation); sums and ratios
propagate independent errors in quadrature.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import pandas as pd

from lab.metrics.shares import past_warmup

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """A mean and the half-width of its confidence interval (NaN when it cannot be told).

    Args:
        mean: the point estimate.
        ci: half-width of the confidence interval; ``mean ± ci``.
        n: number of samples behind it (0 for derived values).
        std: sample standard deviation (NaN for derived values).
    """

    mean: float
    ci: float = math.nan
    n: int = 0
    std: float = math.nan

    @property
    def low(self) -> float:
        return self.mean - self.ci

    @property
    def high(self) -> float:
        return self.mean + self.ci

    @property
    def relative_ci(self) -> float:
        return abs(self.ci / self.mean) if self.mean else math.nan

    def format(self, digits: int = 3, percent: bool = False) -> str:
        """``"12.3 ± 0.4"`` (or ``"3.1% ± 0.8%"``), for verdict sentences and tables."""
        scale, unit = (100.0, "%") if percent else (1.0, "")
        mean = f"{self.mean * scale:.{digits}g}{unit}"
        if math.isnan(self.ci):
            return mean
        return f"{mean} ± {self.ci * scale:.{max(digits - 1, 1)}g}{unit}"

    def __str__(self) -> str:
        return self.format()


Quantity = float | int | Estimate | Sequence[float]


def t_quantile(confidence: float, df: int) -> float:
    """Two-sided critical value: Student's t with ``df`` degrees of freedom, or normal."""
    p = 0.5 + confidence / 2
    try:
        from scipy import stats as sps
    except ImportError:
        return NormalDist().inv_cdf(p)
    return float(sps.t.ppf(p, df))


def mean_ci(values: Iterable[float], confidence: float = CONFIDENCE) -> Estimate:
    """Mean of ``values`` with the half-width of its confidence interval.

    One value gives a NaN interval (no spread is known); no values give a NaN mean.
    """
    xs = [float(v) for v in values if v is not None and not _isnan(v)]
    n = len(xs)
    if n == 0:
        return Estimate(math.nan, math.nan, 0, math.nan)
    mean = math.fsum(xs) / n
    if n == 1:
        return Estimate(mean, math.nan, 1, math.nan)
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    return Estimate(mean, t_quantile(confidence, n - 1) * std / math.sqrt(n), n, std)


def _isnan(v: Any) -> bool:
    try:
        return math.isnan(float(v))
    except (TypeError, ValueError):
        return True


def as_estimate(x: Quantity, confidence: float = CONFIDENCE) -> Estimate:
    """An Estimate from a number (no interval), an Estimate, or samples (mean ± CI)."""
    if isinstance(x, Estimate):
        return x
    if isinstance(x, (int, float)):
        return Estimate(float(x))
    return mean_ci(x, confidence)


def step_throughput(records: pd.DataFrame, warmup: int = 0) -> pd.DataFrame:
    """One row per measured step: ``rank``, ``step``, ``throughput`` (samples/second).

    Throughput is ``samples / seconds`` where a record has both, else the record's own
    ``throughput`` (what foreign formats print). Warm-up is excluded twice over: records
    flagged ``warmup`` and the first ``warmup`` steps of every rank. Where a rank printed
    step records from several sources, only the lab's own are used.
    """
    cols = ["rank", "step", "throughput"]
    if records is None or records.empty or "kind" not in records:
        return pd.DataFrame(columns=cols)
    steps = past_warmup(records[records["kind"] == "step"]).copy()
    for col in ("rank", "step", "samples", "seconds", "throughput"):
        if col not in steps:
            steps[col] = math.nan
    samples = pd.to_numeric(steps["samples"], errors="coerce")
    seconds = pd.to_numeric(steps["seconds"], errors="coerce")
    derived = samples / seconds.where(seconds > 0)
    steps["throughput"] = derived.fillna(pd.to_numeric(steps["throughput"], errors="coerce"))
    steps = steps[steps["throughput"].notna()]
    steps["rank"] = pd.to_numeric(steps["rank"], errors="coerce").fillna(-1).astype(int)
    steps = _one_source_per_rank(steps)
    if warmup > 0:
        steps = steps[steps.groupby("rank", sort=False).cumcount() >= warmup]
    return steps[cols].reset_index(drop=True)


def _one_source_per_rank(steps: pd.DataFrame) -> pd.DataFrame:
    """Keep one source of step records per rank: the lab's own if present, else the first.

    The lab's workloads print ``@lab`` step records *and* the upstream benchmark lines
    (Horovod's ``Iter #k``, which averages several batches); counting both would mix two
    meanings of "step".
    """
    if "source" not in steps or steps.empty:
        return steps
    source = steps["source"].astype(object).where(steps["source"].notna(), "")
    keep = pd.Series(False, index=steps.index)
    for _, idx in steps.groupby("rank", sort=False).groups.items():
        present = list(dict.fromkeys(source.loc[idx]))
        chosen = "lab" if "lab" in present else present[0]
        keep.loc[idx] = source.loc[idx] == chosen
    return steps[keep]


def per_rank_throughput(
    records: pd.DataFrame, warmup: int = 0, confidence: float = CONFIDENCE
) -> pd.DataFrame:
    """Per rank: mean step throughput with its CI; columns rank, mean, ci, n, std.

    Rank -1 collects steps whose rank is unknown.
    """
    steps = step_throughput(records, warmup)
    rows = []
    for rank, group in steps.groupby("rank", sort=True):
        est = mean_ci(group["throughput"], confidence)
        rows.append({"rank": int(rank), "mean": est.mean, "ci": est.ci, "n": est.n, "std": est.std})
    return pd.DataFrame(rows, columns=["rank", "mean", "ci", "n", "std"])


def sum_estimates(estimates: Iterable[Estimate]) -> Estimate:
    """Sum of independent estimates; CIs add in quadrature (a missing CI stays missing)."""
    ests = list(estimates)
    if not ests:
        return Estimate(math.nan)
    mean = math.fsum(e.mean for e in ests)
    ci = math.sqrt(math.fsum(e.ci**2 for e in ests))
    return Estimate(mean, ci, sum(e.n for e in ests))


def total_throughput(
    records_or_ranks: pd.DataFrame, warmup: int = 0, confidence: float = CONFIDENCE
) -> Estimate:
    """Total throughput of a run: the sum over ranks of per-rank mean throughput.

    Accepts either a run's records or the output of ``per_rank_throughput``.
    """
    ranks = records_or_ranks
    if not {"mean", "ci"} <= set(ranks.columns):
        ranks = per_rank_throughput(records_or_ranks, warmup, confidence)
    return sum_estimates(
        Estimate(float(r["mean"]), float(r["ci"]), int(r["n"])) for _, r in ranks.iterrows()
    )


def ratio(num: Quantity, den: Quantity, confidence: float = CONFIDENCE) -> Estimate:
    """``num / den`` with relative errors added in quadrature (independent inputs)."""
    a, b = as_estimate(num, confidence), as_estimate(den, confidence)
    if b.mean == 0:
        return Estimate(math.nan)
    r = a.mean / b.mean
    parts = [e.ci / e.mean for e in (a, b) if not math.isnan(e.ci) and e.mean]
    if len(parts) == 0:
        return Estimate(r)
    return Estimate(r, abs(r) * math.sqrt(math.fsum(p * p for p in parts)))


def scaling_efficiency(
    total_n: Quantity, n: int, single: Quantity, confidence: float = CONFIDENCE
) -> float | Estimate:
    """``total(N) / (N × single)``: 1.0 is linear scaling.

    Plain numbers give a float; an Estimate or samples on either side give an Estimate.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    est = ratio(total_n, single, confidence)
    est = Estimate(est.mean / n, est.ci / n)
    return est.mean if _plain(total_n) and _plain(single) else est


def overhead(
    with_: Quantity, without: Quantity, confidence: float = CONFIDENCE
) -> float | Estimate:
    """``1 − with/without``: the fraction of throughput lost to a feature (e.g. monitoring).

    Plain numbers give a float; an Estimate or samples on either side give an Estimate
    whose CI is that of the ratio.
    """
    est = ratio(with_, without, confidence)
    est = Estimate(1.0 - est.mean, est.ci)
    return est.mean if _plain(with_) and _plain(without) else est


def _plain(x: Quantity) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def paired_ratio(
    num: Sequence[float | None], den: Sequence[float | None], confidence: float = CONFIDENCE
) -> Estimate:
    """Mean of the per-pair ratios ``num[i] / den[i]`` with the t-interval over pairs.

    Measurements taken in the same round of an interleaved schedule share that round's
    machine state (other users' load, thermal drift); the ratio within a round cancels
    what they share, so its spread is smaller than that of two independent means. Pairs
    with a missing (None/NaN) or zero denominator are left out.
    """
    ratios = []
    for a, b in zip(num, den, strict=False):
        if a is None or b is None or _isnan(a) or _isnan(b) or float(b) == 0:
            continue
        ratios.append(float(a) / float(b))
    return mean_ci(ratios, confidence)


@dataclass(frozen=True)
class MedianInterval:
    """A median and a distribution-free interval around it (order statistics).

    Args:
        median: the sample median.
        low, high: the k-th smallest and k-th largest value: they bracket the population's
            median with probability ``coverage`` whatever the distribution.
        coverage: that probability, exact for ``n`` independent values.
        n: number of values behind it.
    """

    median: float
    low: float
    high: float
    coverage: float
    n: int


def median_interval(values: Iterable[float], confidence: float = 0.9) -> MedianInterval:
    """The median of ``values`` and the narrowest order-statistic interval whose coverage
    of the population median is at least ``confidence`` (sign test; the full range where
    even that falls short, with its smaller coverage).

    For measurements where a minority is hit by something outside the experiment (another
    tenant's burst on a shared machine): the median ignores them, where a mean or a
    t-interval would follow them.
    """
    xs = sorted(float(v) for v in values if not _isnan(v))
    n = len(xs)
    if not n:
        return MedianInterval(math.nan, math.nan, math.nan, math.nan, 0)

    def coverage(k: int) -> float:  # P(x_(k) <= median <= x_(n+1-k))
        return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n

    k = 1
    while k + 1 <= (n + 1) // 2 and coverage(k + 1) >= confidence:
        k += 1
    mid = n // 2
    median = xs[mid] if n % 2 else (xs[mid - 1] + xs[mid]) / 2
    return MedianInterval(median, xs[k - 1], xs[n - k], coverage(k), n)


def step_times(records: pd.DataFrame) -> pd.DataFrame:
    """Every step a run timed, warm-up included: ``rank``, ``step``, ``samples``, ``seconds``
    and, where the run alternated a feature off and on (lab.bench.alternation), ``phase``.

    For warm-up detection from the data (lab.metrics.protocol.steady_state_start), so
    steps the workload flagged as warm-up are kept. One source of records per rank, the
    lab's own where present; rows in (rank, step) order; steps without a time are dropped.
    """
    cols = ["rank", "step", "samples", "seconds"]
    if records is None or records.empty or "kind" not in records:
        return pd.DataFrame(columns=cols)
    steps = records[records["kind"] == "step"].copy()
    for col in cols:
        steps[col] = pd.to_numeric(steps[col], errors="coerce") if col in steps else math.nan
    steps = steps[steps["seconds"].notna() & (steps["seconds"] > 0)]
    steps["rank"] = steps["rank"].fillna(-1).astype(int)
    steps = _one_source_per_rank(steps)
    if "phase" in steps and steps["phase"].notna().any():
        cols = [*cols, "phase"]
    return steps.sort_values(["rank", "step"], kind="stable")[cols].reset_index(drop=True)
