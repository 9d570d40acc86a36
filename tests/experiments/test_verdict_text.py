"""How verdict sentences print shares (lab.experiments.verdicts.percent)."""

from __future__ import annotations

import math

import pytest

from lab.experiments.verdicts import percent


@pytest.mark.parametrize(
    ("value", "ci", "decimals", "text"),
    [
        (0.873, 0.05, 0, "87% ± 5%"),
        (0.083, 0.043, 1, "8.3% ± 4.3%"),
        (0.97, math.nan, 0, "97%"),
        (0.2, None, 1, "20.0%"),
    ],
)
def test_a_share_prints_with_its_interval_where_there_is_one(
    value: float, ci: float | None, decimals: int, text: str
) -> None:
    assert percent(value, ci, decimals) == text
