"""The published reference numbers: present, sourced, and derived honestly."""

from __future__ import annotations

import pytest

from lab.experiments.kungfu.published import KUNGFU_OSDI20
from lab.experiments.kungfu.published import PUBLISHED as KUNGFU_ROWS
from lab.experiments.published import all_rows, published_rows, published_table
from lab.metrics.published import derived_overheads


def test_every_number_names_its_source() -> None:
    assert KUNGFU_ROWS and set(KUNGFU_ROWS) <= set(all_rows())
    for row in KUNGFU_ROWS:
        assert row.source and "README" in row.source
    for row in all_rows():
        assert row.source and row.paper and row.figure and row.unit


def test_kungfu_fig8_monitoring_numbers() -> None:
    table = published_table(paper=KUNGFU_OSDI20, figure="Fig 8")
    values = dict(zip(table["setting"], table["value"], strict=True))
    assert values == {
        "baseline": 30.5,
        "noise scale": 29.1,
        "variance interval 1": 24.3,
        "variance interval 8": 29.6,
    }
    assert set(table["workers"]) == {4} and set(table["batch_size"]) == {8}
    assert all(table["per_worker"])


def test_kungfu_fig9_and_fig7_numbers() -> None:
    kf, hvd = (
        published_rows(paper=KUNGFU_OSDI20, figure="Fig 9", system="KungFu")[0],
        published_rows(paper=KUNGFU_OSDI20, figure="Fig 9", system="Horovod")[0],
    )
    assert (kf.value, kf.error, kf.workers, kf.batch_size) == (43.4, 1.2, 32, 32)
    assert (hvd.value, hvd.error) == (12.7, 0.7)
    resize = {r.setting: r.value for r in published_rows(paper=KUNGFU_OSDI20, figure="Fig 7")}
    assert resize == {"resize 1→2": 20.39, "resize 2→1": 0.04012}


def test_derived_overheads_say_they_are_derived() -> None:
    over = derived_overheads(published_table(paper=KUNGFU_OSDI20, figure="Fig 8"))
    got = dict(zip(over["setting"], over["value"], strict=True))
    assert got["noise scale"] == pytest.approx(1 - 29.1 / 30.5)
    assert got["variance interval 1"] == pytest.approx(1 - 24.3 / 30.5)
    assert got["variance interval 8"] == pytest.approx(1 - 29.6 / 30.5)
    assert all(s.startswith("derived from") for s in over["source"])
    assert set(over["unit"]) == {"fraction"}


def test_unknown_filter_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown field"):
        published_rows(colour="red")
