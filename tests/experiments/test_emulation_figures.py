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
