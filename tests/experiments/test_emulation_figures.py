"""The emulated cluster's check: speed-ups, ring bounds, figure and verdict rule on
hand-made measurements."""

from __future__ import annotations

import pandas as pd
import pytest

from lab.errors import NothingMeasured
from lab.experiments import Status, emulation


def _scaling(shares: float = 0.4, top: float = 3.6) -> pd.DataFrame:
    return emulation.speedups(
        pd.DataFrame(
            {
                "hosts": [4, 1, 2],
                "throughput": [top, 1.0, 1.9],
                "cpu_share_per_host": [shares, 0.4, 0.4],
                "run_dir": ["r4", "r1", "r2"],
            }
        )
    )


def _allreduce(slow_s: float) -> pd.DataFrame:
    table = pd.DataFrame(
        {"bandwidth": ["1gbit", "100mbit"], "measured_s": [0.5, slow_s], "run_dir": ["a", "b"]}
    )
    return emulation.with_bounds(table, nbytes=2**20, n_hosts=2)


def test_speedups_and_ring_bounds() -> None:
    s = _scaling()
    assert s["hosts"].tolist() == [1, 2, 4]
    assert s["efficiency"].tolist() == pytest.approx([1.0, 0.95, 0.9])
    a = _allreduce(0.1).set_index("bandwidth")
    assert a.loc["100mbit", "ring_bound_s"] == pytest.approx(2**20 * 8 / 100e6)
    assert a.loc["1gbit", "ring_bound_s"] == pytest.approx(2**20 * 8 / 1e9)
    fig = emulation.figure(s, _allreduce(0.1), caption="test")
    assert [t.name for t in fig.data] == [
        "lab",
        "linear",
        "gloo ring",
        "bound 2(N−1)/N · bytes / bandwidth",
    ]


def test_emulation_verdict_rule() -> None:
    bound = 2**20 * 8 / 100e6
    ok = emulation.verdict(_scaling(), _allreduce(1.2 * bound), 0.4, "smoke", runs=("r",))
    assert ok.status is Status.REPRODUCED and ok.lab_value == pytest.approx(0.9)
    assert "No paper publishes" in ok.why and ok.published_value is None
    slow_link = emulation.verdict(_scaling(), _allreduce(3 * bound), 0.4, "smoke", runs=("r",))
    assert slow_link.status is Status.NOT_REPRODUCED
    starved = emulation.verdict(
        _scaling(shares=0.2, top=2.0), _allreduce(bound), 0.4, "smoke", runs=("r",)
    )
    assert starved.status is Status.NOT_RESOLVED and "50% of its quota" in starved.why
    with pytest.raises(NothingMeasured):
        emulation.verdict(_scaling().iloc[0:0], _allreduce(bound), 0.4, "smoke")


def _rounds(tops: list[float]) -> pd.DataFrame:
    """Rounds whose 1-host throughput differs (the machine's speed) and whose 4 hosts
    reach ``tops`` × it."""
    rows = []
    for r, (top, one) in enumerate(zip(tops, [1.0, 1.3, 0.8], strict=False)):
        rows += [{"round": r, "hosts": n, "throughput": t * one, "cpu_share_per_host": 0.4,
                  "run_dir": f"r{r}-{n}"} for n, t in ((1, 1.0), (2, 1.9), (4, top))]  # fmt: skip
    return emulation.speedups(pd.DataFrame(rows))


def test_the_fraction_of_linear_splits_into_cpu_received_and_work_per_cpu_second() -> None:
    """Four hosts at 84% of linear that each got their CPU but did less per CPU-second:
    the why says which factor fell."""
    s = emulation.speedups(
        pd.DataFrame(
            {
                "hosts": [1, 4],
                "throughput": [1.0, 3.36],
                "cpu_share_per_host": [0.40, 0.42],
                "work_per_cpu_s": [2.5, 2.0],
                "run_dir": ["r1", "r4"],
            }
        )
    )
    top = s.iloc[-1]
    assert top["efficiency"] == pytest.approx(top["cpu_ratio"] * top["work_ratio"])
    bound = 2**20 * 8 / 100e6
    v = emulation.verdict(s, _allreduce(bound), 0.4, "smoke", runs=("r",))
    assert "a host received 1.05× the CPU and did 0.80× the work per CPU-second" in v.why
    unmeasured = emulation.verdict(_scaling(), _allreduce(bound), 0.4, "smoke")
    assert "work per CPU-second" not in unmeasured.why  # runs without the counts say nothing


def test_a_spin_run_is_read_after_its_shares_applied() -> None:
    """One host's first step at full speed (flagged warm-up by lab.metrics.shares) is left
    out of its pace: counted, it made one host look 30% faster than its quota lets it."""
    records = pd.DataFrame(
        [
            {"kind": "step", "rank": 0, "samples": 355, "seconds": 0.5, "cpu_seconds": 0.5,
             "warmup": True},
            *({"kind": "step", "rank": 0, "samples": 150, "seconds": 0.5, "cpu_seconds": 0.2,
               "warmup": pd.NA} for _ in range(3)),
            {"kind": "summary", "rank": 0, "samples": 805, "seconds": 2.0},
        ]
    )  # fmt: skip
    rates = emulation.quota_rates(records)
    assert rates == pytest.approx(
        {"throughput": 300.0, "cpu_share_per_host": 0.4, "work_per_cpu_s": 750.0}
    )
    two = pd.concat([records, records.assign(rank=1)], ignore_index=True)
    assert emulation.quota_rates(two)["throughput"] == pytest.approx(600.0)  # summed over ranks
    with pytest.raises(NothingMeasured, match="after its CPU shares applied"):
        emulation.quota_rates(records.iloc[[0, 4]])  # the full-speed step and the summary


def test_scaling_rounds_are_judged_each_against_its_own_one_host_run() -> None:
    """Each round's speed-up is over its own 1-host run: a machine 30% faster in the second
    round does not make it scale better. Rounds on both sides of the bar do not decide."""
    s = _rounds([3.6, 3.4])
    assert s.loc[s["hosts"] == 4, "efficiency"].tolist() == pytest.approx([0.9, 0.85])
    bound = 2**20 * 8 / 100e6
    both = emulation.verdict(s, _allreduce(bound), 0.4, "smoke", runs=("r",))
    assert both.status is Status.REPRODUCED and both.lab_value == pytest.approx(0.875)
    assert "(88% of linear; rounds in alternating order: 90%, 85%)" in both.why
    split = emulation.verdict(_rounds([3.7, 3.1]), _allreduce(bound), 0.4, "smoke", runs=("r",))
    assert split.status is Status.NOT_RESOLVED and "both sides of 80%" in split.why
    low = emulation.verdict(_rounds([3.0, 3.1]), _allreduce(bound), 0.4, "smoke", runs=("r",))
    assert low.status is Status.NOT_REPRODUCED
    fig = emulation.figure(s, _allreduce(0.1), caption="test")
    lab = next(t for t in fig.data if t.name == "lab")
    assert list(lab.y) == pytest.approx([1.0, 1.9, 3.5])
    assert list(lab.error_y.array) == pytest.approx([0.0, 0.0, 0.1])


def test_a_round_above_linear_from_faster_cores_is_judged_at_the_cpu_received() -> None:
    """Four hosts at 122% of linear that got their CPU and did 1.22× the work per
    CPU-second of the one host: a pace of the shared cores, taken out of the judgement;
    cores that slowed under sharing stay in it."""

    def one_round(top: float, work: float, cpu: float = 0.4, alone: float = 0.4) -> pd.DataFrame:
        return emulation.speedups(
            pd.DataFrame(
                {
                    "hosts": [1, 4],
                    "throughput": [1.0, top],
                    "cpu_share_per_host": [alone, cpu],
                    "work_per_cpu_s": [2.5, work],
                    "run_dir": ["r1", "r4"],
                }
            )
        )

    bound = 2**20 * 8 / 100e6
    fast = emulation.verdict(one_round(4.88, 3.05), _allreduce(bound), 0.4, "smoke", runs=("r",))
    assert fast.status is Status.REPRODUCED and fast.lab_value == pytest.approx(1.0)
    assert "(122% of linear)" in fast.why and "1.22× the work per CPU-second" in fast.why
    assert "judged 100%" in fast.why
    # hosts that got 0.77 of the CPU the one host got are not lifted to 94% by the drift
    short = one_round(4 * 0.77 * 1.22, 3.05, cpu=0.3388, alone=0.44)
    assert short["efficiency"].iloc[-1] == pytest.approx(0.9394)
    v = emulation.verdict(short, _allreduce(bound), 0.4, "smoke", runs=("r",))
    assert v.lab_value == pytest.approx(0.77) and v.status is Status.NOT_REPRODUCED
    slow = emulation.verdict(one_round(3.0, 1.875), _allreduce(bound), 0.4, "smoke", runs=("r",))
    assert slow.lab_value == pytest.approx(0.75) and slow.status is Status.NOT_REPRODUCED
    assert "judged" not in slow.why  # slower cores are the emulation's to show
