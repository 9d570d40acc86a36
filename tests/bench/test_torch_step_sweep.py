"""The step-time sweep workload: its windowed median and its flag checks (no torch here)."""

from __future__ import annotations

import math

import pytest

from lab.bench.flags import check_argv
from lab.bench.torch_step_sweep import parse_args, windowed_median, windows
from lab.errors import ParameterError

MODULE = ["python", "-m", "lab.bench.torch_step_sweep"]


def test_windows_average_within_windows_and_a_short_tail_joins_the_last() -> None:
    assert windows([0.1] * 6, 0.3) == pytest.approx([0.1, 0.1])
    # a throttled quota: fast steps then one long stall per window average out
    assert windows([0.02, 0.02, 0.26] * 2, 0.3) == pytest.approx([0.1, 0.1])
    assert windows([0.3, 0.3, 0.1], 0.3) == pytest.approx([0.3, 0.2])
    assert windows([0.05, 0.15], 0.3) == pytest.approx([0.1])  # shorter than one window
    assert windows([], 0.3) == []


def test_windowed_median_pools_visits_and_ignores_a_burst() -> None:
    # three visits of 0.1 s steps; a burst slows the whole second visit
    visits = [[0.1] * 6, [0.4] * 2, [0.1] * 6]
    assert windowed_median(visits, 0.3) == pytest.approx(0.1)
    # windows never span two visits
    assert windowed_median([[0.2], [0.2]], 0.3) == pytest.approx(0.2)
    assert math.isnan(windowed_median([[], []], 0.3))


def test_flags_are_lists_and_checked_before_launch() -> None:
    ns = parse_args(["--image-sizes", "32,48", "--micro-batches", "1,2,4", "--threads", "2,1"])
    assert ns.image_sizes == [32, 48] and ns.micro_batches == [1, 2, 4] and ns.threads == [2, 1]
    check_argv([*MODULE, "--image-sizes", "32"])
    for bad in (
        ["--micro-batches", "0"],
        ["--image-sizes", "4"],
        ["--image-sizes", "a,b"],
        ["--seconds", "0"],
        ["--min-steps", "0"],
        ["--rounds", "0"],
    ):
        with pytest.raises(ParameterError):
            check_argv([*MODULE, *bad])
