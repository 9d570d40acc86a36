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
