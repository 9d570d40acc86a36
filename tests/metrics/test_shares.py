"""Steps run before an emulated host's CPU share applied are warm-up (lab.metrics.shares)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from lab.metrics import store
from lab.metrics.records import format_record
from lab.metrics.shares import flag_before_shares, past_warmup, shares_applied_at
from lab.metrics.stats import step_throughput

T0 = 1_800_000_000.0


def _steps(ends: list[float], seconds: float = 0.5) -> pd.DataFrame:
    rows = [{"kind": "header", "rank": 0}]
    rows += [
        {"kind": "step", "rank": 0, "step": i, "samples": 32, "seconds": seconds,
         "time": T0 + end, "warmup": i == 0}
        for i, end in enumerate(ends)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def _manifest(after: float | None, **shares: object) -> dict[str, object]:
    return {
        "started": {"epoch": T0},
        "cpu_shares": {"startup": "full", "after_s": after, "why": "first step", **shares},
    }


def test_steps_that_ran_before_the_shares_are_warm_up() -> None:
    """Shares at 2.0 s: the step ending at 1.0 and the one spanning 1.5-2.0 ran at full
    speed; the one starting 0.04 s early (under a tenth of its 0.5 s) counts."""
    out = flag_before_shares(_steps([1.0, 2.0, 2.46, 3.0]), _manifest(2.0))
    steps = out[out["kind"] == "step"]
    assert steps["before_shares"].tolist() == [True, True, False, False]
    assert steps["warmup"].tolist() == [True, True, False, False]
    assert pd.isna(out.loc[0, "warmup"])  # the header is left as it was
    assert step_throughput(out)["step"].tolist() == [2, 3]


def test_the_epoch_the_gate_wrote_wins_over_start_plus_delay() -> None:
    manifest = _manifest(2.0, epoch=T0 + 3.2)
    assert shares_applied_at(manifest) == pytest.approx(T0 + 3.2)
    steps = flag_before_shares(_steps([1.0, 2.0, 3.0, 4.0]), manifest)
    assert steps[steps["kind"] == "step"]["before_shares"].tolist() == [True, True, True, False]


@pytest.mark.parametrize(
    "manifest",
    [
        {"started": {"epoch": T0}},  # not emulated
        {"started": {"epoch": T0}, "cpu_shares": {"startup": "share"}},
        _manifest(None, why="never"),
    ],
)
def test_runs_without_a_full_speed_start_are_left_alone(manifest: dict[str, object]) -> None:
    records = _steps([1.0, 2.0, 3.0])
    assert shares_applied_at(manifest) is None
    pd.testing.assert_frame_equal(flag_before_shares(records, manifest), records)


def test_load_run_flags_them_also_from_a_cache_written_without_the_flag(
    make_run: Callable[..., Path],
) -> None:
    """Every step of the run ended before the shares applied (the late record seen on this
    machine): none is left to measure, even when the cached table predates the flag."""
    ends = [10.3, 11.0, 11.2, 11.5]
    lines = [
        format_record("step", rank=0, step=i, samples=32, seconds=0.06, time=T0 + e)
        for i, e in enumerate(ends)
    ]
    run = make_run(logs={0: lines}, cpu_shares={"startup": "full", "after_s": 11.79,
                                               "why": "first step"})  # fmt: skip
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["started"]["epoch"] = T0
    (run / "manifest.json").write_text(json.dumps(manifest))
    first = store.load_run(run)
    assert first[first["kind"] == "step"]["before_shares"].all()
    assert step_throughput(first).empty
    cache = run / store.CACHE_NAME
    pd.read_parquet(cache).drop(columns=["before_shares"]).to_parquet(cache)
    again = store.load_run(run)
    assert again[again["kind"] == "step"]["before_shares"].all()


def test_past_warmup_counts_a_step_without_the_flag_as_its_reader_asks() -> None:
    steps = pd.DataFrame({"step": [0, 1, 2, 3], "warmup": [True, False, None, pd.NA]})
    assert past_warmup(steps)["step"].tolist() == [1, 2, 3]
    assert past_warmup(steps, unflagged_is_warmup=True)["step"].tolist() == [1]
    bare = steps.drop(columns="warmup")
    assert past_warmup(bare)["step"].tolist() == [0, 1, 2, 3]
    assert past_warmup(bare, unflagged_is_warmup=True).empty
