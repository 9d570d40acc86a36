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
    assert ns.image_sizes == (32, 48) and ns.micro_batches == (1, 2, 4) and ns.threads == (2, 1)
    assert ns.allocator == "keep"  # the stand-ins' default: freed blocks kept, as on a GPU
    check_argv([*MODULE, "--image-sizes", "32"])
    for bad in (
        ["--micro-batches", "0"],
        ["--image-sizes", "4"],
        ["--image-sizes", "a,b"],
        ["--seconds", "0"],
        ["--min-steps", "0"],
        ["--rounds", "0"],
        ["--timeout", "0"],
        ["--allocator", "jemalloc"],
    ):
        with pytest.raises(ParameterError):
            check_argv([*MODULE, *bad])


@pytest.mark.slow
def test_in_step_ranks_start_no_round_before_every_rank_ended_the_last(tmp_path) -> None:
    """Two ranks with --in-step: each round's start (its ``round`` event) on either rank
    comes after every timed step of the round before on both."""
    import sys

    import pandas as pd

    from lab.cluster import launch
    from lab.metrics.store import load_run

    argv = [sys.executable, "-m", "lab.bench.torch_step_sweep", "--image-sizes", "16",
            "--micro-batches", "1,2", "--seconds", "0.2", "--rounds", "3", "--in-step"]  # fmt: skip
    result = launch(argv, np=2, launcher="local", cluster="local", view=None, timeout=180,
                    experiment="test-in-step", results_root=tmp_path, check=False)  # fmt: skip
    assert result.ok, result.reason
    records = load_run(result.run_dir)
    rounds = records[records["name"] == "round"].assign(round=lambda d: d["round"].astype(int))
    assert sorted(rounds.groupby("rank")["round"].apply(list).tolist()) == [[1, 2, 3]] * 2
    steps = records[records["kind"] == "step"].dropna(subset=["visit"])
    ended = steps.groupby(steps["visit"].astype(int))["time"].max()
    started = rounds.groupby("round")["time"].min()
    assert all(started[r] >= ended[r - 1] for r in (2, 3)), (started, ended)
    assert pd.to_numeric(rounds["waited"]).ge(0).all()
