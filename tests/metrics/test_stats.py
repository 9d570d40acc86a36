"""Statistics on numbers whose answers are known."""

from __future__ import annotations

import math
import statistics

import pandas as pd
import pytest
from scipy import stats as sps

from lab.metrics import stats
from lab.metrics.stats import Estimate, mean_ci, overhead, scaling_efficiency

SAMPLE = [30.1, 31.6, 29.4, 30.9, 30.2, 29.8, 31.0, 30.5]


def test_mean_ci_matches_scipy_t_interval() -> None:
    est = mean_ci(SAMPLE)
    low, high = sps.t.interval(
        0.95, len(SAMPLE) - 1, loc=statistics.mean(SAMPLE), scale=sps.sem(SAMPLE)
    )
    assert est.mean == pytest.approx(statistics.mean(SAMPLE))
    assert est.low == pytest.approx(low)
    assert est.high == pytest.approx(high)
    assert est.n == len(SAMPLE)
    assert est.std == pytest.approx(statistics.stdev(SAMPLE))


def test_mean_ci_small_samples() -> None:
    assert math.isnan(mean_ci([]).mean)
    one = mean_ci([5.0])
    assert one.mean == 5.0 and math.isnan(one.ci)
    two = mean_ci([1.0, 3.0])  # std = sqrt(2), t(0.975, 1) = 12.706
    assert two.ci == pytest.approx(12.7062047 * math.sqrt(2) / math.sqrt(2))


def test_normal_fallback_when_scipy_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_scipy(name, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name.startswith("scipy"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_scipy)
    assert stats.t_quantile(0.95, 3) == pytest.approx(1.959964, abs=1e-5)


def _records(rows: list[tuple[int, int, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"kind": "step", "rank": r, "step": s, "samples": n, "seconds": sec, "source": "lab"}
            for r, s, n, sec in rows
        ]
    )


def test_step_throughput_excludes_warmup_per_rank() -> None:
    df = _records(
        [
            (0, 0, 32, 4.0),
            (0, 1, 32, 0.5),
            (0, 2, 32, 0.25),
            (1, 0, 32, 8.0),
            (1, 1, 32, 1.0),
            (1, 2, 32, 0.5),
        ]
    )
    out = stats.step_throughput(df, warmup=1)
    assert out.to_dict("list") == {
        "rank": [0, 0, 1, 1],
        "step": [1, 2, 1, 2],
        "throughput": [64.0, 128.0, 32.0, 64.0],
    }


def test_step_throughput_prefers_lab_records_over_printed_lines() -> None:
    df = _records([(0, 0, 10, 1.0), (0, 1, 10, 1.0)])
    extra = pd.DataFrame(
        [{"kind": "step", "rank": 0, "step": 0, "throughput": 999.0, "source": "horovod"}]
    )
    flagged = pd.DataFrame(
        [{"kind": "step", "rank": 0, "step": 0, "throughput": 1.0, "source": "lab", "warmup": True}]
    )
    out = stats.step_throughput(pd.concat([df, extra, flagged], ignore_index=True))
    assert out["throughput"].tolist() == [10.0, 10.0]


def test_per_rank_and_total_throughput() -> None:
    rank0 = [(0, i, 8, 8 / t) for i, t in enumerate([10, 12, 14])]
    rank1 = [(1, i, 8, 8 / t) for i, t in enumerate([20, 22, 24])]
    df = _records(rank0 + rank1)
    ranks = stats.per_rank_throughput(df)
    assert ranks["rank"].tolist() == [0, 1]
    assert ranks["mean"].tolist() == pytest.approx([12.0, 22.0])
    ci0 = mean_ci([10, 12, 14]).ci
    assert ranks["ci"].tolist() == pytest.approx([ci0, ci0])
    total = stats.total_throughput(df)
    assert total.mean == pytest.approx(34.0)
    assert total.ci == pytest.approx(math.sqrt(2) * ci0)
    assert stats.total_throughput(ranks) == total


def test_scaling_efficiency() -> None:
    assert scaling_efficiency(360.0, 4, 100.0) == pytest.approx(0.9)
    est = scaling_efficiency(Estimate(360.0, 36.0), 4, Estimate(100.0, 5.0))
    assert isinstance(est, Estimate)
    assert est.mean == pytest.approx(0.9)
    assert est.ci == pytest.approx(0.9 * math.sqrt(0.1**2 + 0.05**2))
    with pytest.raises(ValueError):
        scaling_efficiency(1.0, 0, 1.0)


def test_overhead_plain_and_with_samples() -> None:
    # KungFu README Fig 8: 30.5 -> 29.1 img/s with noise-scale monitoring
    assert overhead(29.1, 30.5) == pytest.approx(1 - 29.1 / 30.5)
    with_, without = [29.0, 29.2, 29.1, 29.1], [30.4, 30.6, 30.5, 30.5]
    est = overhead(with_, without)
    a, b = mean_ci(with_), mean_ci(without)
    r = a.mean / b.mean
    assert est.mean == pytest.approx(1 - r)
    assert est.ci == pytest.approx(r * math.sqrt((a.ci / a.mean) ** 2 + (b.ci / b.mean) ** 2))
    assert est.format(percent=True).endswith("%")


def test_estimate_format() -> None:
    assert Estimate(12.345, 0.4).format() == "12.3 ± 0.4"
    assert Estimate(0.031, 0.008).format(2, percent=True) == "3.1% ± 0.8%"
    assert Estimate(5.0).format() == "5"


def test_median_interval_is_the_sign_test_interval() -> None:
    # n = 9: [x(2), x(8)] covers the median with 1 - 2 * P(Bin(9, 1/2) <= 1) = 96.1 %, and
    # [x(3), x(7)] with only 82.0 %: the narrowest one of at least 90 % is the former
    got = stats.median_interval([9, 1, 8, 2, 7, 3, 6, 4, 5])
    assert (got.median, got.low, got.high, got.n) == (5, 2, 8, 9)
    assert got.coverage == pytest.approx(1 - 2 * sps.binom.cdf(1, 9, 0.5))
    wide = stats.median_interval(range(1, 10), confidence=0.999)
    assert (wide.low, wide.high) == (1, 9) and wide.coverage < 0.999  # the most there is
    even = stats.median_interval([4.0, 1.0, 3.0, 2.0, math.nan])
    assert even.median == 2.5 and even.n == 4
    assert math.isnan(stats.median_interval([]).median)


def test_median_interval_is_not_moved_by_a_minority_of_outliers() -> None:
    calm = [0.004, -0.002, 0.010, 0.001, 0.006]
    hit = stats.median_interval([*calm, 0.152, -0.080])  # two runs met another tenant
    assert hit.median == pytest.approx(0.004)
    assert statistics.mean([*calm, 0.152, -0.080]) > 0.01  # where a mean would follow them
