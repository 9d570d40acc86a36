"""Lifetime CDFs from the shipped table, and the what-if built on the lab's models."""

from __future__ import annotations

import pytest

from lab.errors import NothingMeasured, ParameterError
from lab.experiments.cmdare import lifetimes, whatif
from lab.experiments.cmdare.transient import what_if
from lab.experiments.verdicts import Status


@pytest.fixture(scope="module")
def table():
    return lifetimes.lifetime_table()


def test_the_lifetime_table_loads_as_cdfs(table) -> None:
    assert set(table.columns) == {"gpu", "region", "within_hours", "cdf"}
    assert set(table["gpu"]) == {"K80", "P100", "V100"}
    assert table.groupby("gpu")["region"].nunique().to_dict() == {"K80": 4, "P100": 4, "V100": 4}
    for _, g in table.groupby(["gpu", "region"]):
        cdf = g.sort_values("within_hours")["cdf"]
        assert cdf.is_monotonic_increasing and cdf.min() >= 0 and cdf.max() <= 1


def test_instance_counts_come_from_the_cdf_values(table) -> None:
    assert lifetimes.instances_behind([0.25, 0.5, 0.75]) == 4
    assert lifetimes.instances_behind([0.1041666667, 0.5625]) == 48
    assert lifetimes.counts_summing_to([30, 48, 15, 48], 156) == (30, 48, 30, 48)
    assert lifetimes.counts_summing_to([30, 48], 100) is None
    verdict = lifetimes.lifetimes_verdict(table)
    assert verdict.status is Status.REPRODUCED and verdict.lab_value == 156


def test_distributions_and_the_figure(table) -> None:
    d = lifetimes.distribution(table, "K80", "us-central1")
    assert d.survival_at_limit() == pytest.approx(1 - 0.5625)
    with pytest.raises(ParameterError, match="K80/us-central1"):
        lifetimes.distribution(table, "K80", "mars-1")
    fig = lifetimes.cdf_figure(table)
    caption = next(a.text for a in fig.layout.annotations if a.name == "caption")
    assert len(fig.data) == 12 and "not per-instance" in caption.replace("<br>", " ")
    with pytest.raises(NothingMeasured):
        lifetimes.cdf_figure(table.iloc[0:0])


def test_the_what_if_uses_the_models(table) -> None:
    m = whatif.modelled_job("Res32", "K80", steps=20_000)
    assert 1 < m.job.speed < 20 and m.checkpoint_mb == pytest.approx(16.0, abs=0.1)
    with pytest.raises(ParameterError, match="cnn"):
        whatif.modelled_job("ResNet-9000")
    runs = what_if(
        m.job,
        lifetimes.distribution(table, "K80", "us-east1").sample,
        whatif.restart_times("K80"),
        transient_price=0.135,
        on_demand_price=0.45,
        trials=200,
        seed=0,
    )
    verdict = whatif.what_if_verdict(runs)
    assert verdict.status is Status.REPRODUCED and 0.5 < verdict.lab_value < 0.75
    assert len(whatif.what_if_figure(runs).data) == 3
