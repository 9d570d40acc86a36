"""Sweeps: resume, failure and live-summary semantics, with a run_point that writes run
directories the way a launch does (the lab's own plumbing, no engine involved)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from lab.cluster.rundir import new_run_dir, timestamp, write_manifest
from lab.errors import ParameterError, RankFailure, RanksFailed
from lab.metrics import store
from lab.metrics.figures import throughput_vs_workers
from lab.metrics.layout import EXECUTION_ENV
from lab.metrics.records import format_record
from lab.metrics.sweep import LiveFigure, Sweep

EXPERIMENT = "sweep-test"


@dataclass(frozen=True)
class FakeResult:
    run_dir: str
    state: str
    exit_code: int


class FakeLaunch:
    """Writes a run directory per call; fails on the points it is told to."""

    def __init__(
        self, root: Path, fail: Callable[[dict[str, Any]], str | None] = lambda p: None
    ) -> None:
        self.root, self.fail, self.calls = root, fail, []

    def __call__(self, point: dict[str, Any]) -> FakeResult:
        self.calls.append(dict(point))
        how = self.fail(point)
        if how == "before-launch":
            raise ParameterError("np", point["np"], "1, 2, 4")
        run_dir = new_run_dir(EXPERIMENT, self.root)
        write_manifest(
            run_dir,
            experiment=EXPERIMENT,
            params=point,
            started=timestamp(time.time()),
            launched_by={"execution": os.environ.get(EXECUTION_ENV)},  # as start_manifest
        )
        lines = [
            format_record("step", rank=r, step=s, samples=10 * point["np"], seconds=1.0)
            for r in range(point["np"])
            for s in range(3)
        ]
        for r in range(point["np"]):
            (run_dir / f"rank-{r}.log").write_text(
                "\n".join(x for x in lines if f'"rank": {r},' in x) + "\n"
            )
        state = "failed" if how == "rank" else "succeeded"
        write_manifest(
            run_dir, state=state, exit_code=3 if how == "rank" else 0, ended=timestamp(time.time())
        )
        if how == "rank":
            raise RanksFailed(
                [RankFailure(1, "localhost", 123, 3, tail=("boom",))], run_dir=str(run_dir)
            )
        return FakeResult(str(run_dir), state, 0)


POINTS = [{"model": "smoke", "np": n} for n in (1, 2, 4)]


def test_sweep_runs_every_point_and_writes_the_summary(tmp_path: Path) -> None:
    launch = FakeLaunch(tmp_path)
    seen: list[pd.DataFrame] = []
    sweep = Sweep(
        EXPERIMENT, POINTS, launch, results_root=tmp_path, on_point_done=seen.append, progress=False
    )
    df = sweep.run()
    assert launch.calls == POINTS
    assert df["np"].tolist() == [1, 2, 4]
    assert df["state"].tolist() == ["succeeded"] * 3
    assert df["sweep_status"].tolist() == ["ran"] * 3
    # each rank: 10*np samples per second; total = np * 10 * np
    assert df["throughput_total"].tolist() == pytest.approx([10.0, 40.0, 160.0])
    assert [len(s) for s in seen] == [1, 2, 3]
    saved = pd.read_parquet(tmp_path / EXPERIMENT / "summary.parquet")
    assert sorted(saved["np"].tolist()) == [1, 2, 4]


def test_sweep_resumes_and_reruns_on_request(tmp_path: Path) -> None:
    first = FakeLaunch(tmp_path, fail=lambda p: "rank" if p["np"] == 2 else None)
    Sweep(EXPERIMENT, POINTS, first, results_root=tmp_path, progress=False).run()
    assert len(first.calls) == 3

    again = FakeLaunch(tmp_path)
    sweep = Sweep(EXPERIMENT, POINTS, again, results_root=tmp_path, progress=False)
    assert sweep.pending() == [{"model": "smoke", "np": 2}]
    df = sweep.run()
    assert again.calls == [{"model": "smoke", "np": 2}]  # only the failed point runs again
    assert df["sweep_status"].tolist() == ["skipped", "ran", "skipped"]
    assert df["state"].tolist() == ["succeeded"] * 3

    forced = FakeLaunch(tmp_path)
    Sweep(EXPERIMENT, POINTS, forced, results_root=tmp_path, progress=False).run(rerun=True)
    assert forced.calls == POINTS
    assert len(store.list_runs(EXPERIMENT, tmp_path)) == 3 + 1 + 3


def test_a_batch_execution_resumes_only_its_own_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``make run`` twice is two measurements: the second execution runs every point
    again, a second sweep inside one execution resumes, and a person's session (no
    execution) resumes from any run."""
    monkeypatch.setenv(EXECUTION_ENV, "20261202-040000-aaaaaa")
    first = FakeLaunch(tmp_path)
    Sweep(EXPERIMENT, POINTS, first, results_root=tmp_path, progress=False).run()
    same = FakeLaunch(tmp_path)
    Sweep(EXPERIMENT, POINTS, same, results_root=tmp_path, progress=False).run()
    assert (len(first.calls), same.calls) == (3, [])
    monkeypatch.setenv(EXECUTION_ENV, "20261202-050000-bbbbbb")
    second = FakeLaunch(tmp_path)
    df = Sweep(EXPERIMENT, POINTS, second, results_root=tmp_path, progress=False).run()
    assert second.calls == POINTS and df["sweep_status"].tolist() == ["ran"] * 3
    monkeypatch.delenv(EXECUTION_ENV)
    person = FakeLaunch(tmp_path)
    Sweep(EXPERIMENT, POINTS, person, results_root=tmp_path, progress=False).run()
    assert person.calls == []


def test_points_match_on_key_and_normalised_values(tmp_path: Path) -> None:
    launch = FakeLaunch(tmp_path)
    Sweep(
        EXPERIMENT,
        [{"model": "smoke", "np": 2, "note": "a"}],
        launch,
        results_root=tmp_path,
        progress=False,
    ).run()
    same = Sweep(
        EXPERIMENT,
        [{"model": "smoke", "np": 2.0, "note": "b"}],
        launch,
        key=["model", "np"],
        results_root=tmp_path,
    )
    assert same.pending() == []
    other = Sweep(
        EXPERIMENT, [{"model": "smoke", "np": 2, "note": "b"}], launch, results_root=tmp_path
    )
    assert len(other.pending()) == 1


def test_a_failed_point_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    def fail(p: dict[str, Any]) -> str | None:
        return {1: "before-launch", 2: "rank"}.get(p["np"])

    launch = FakeLaunch(tmp_path, fail=fail)
    df = Sweep(EXPERIMENT, POINTS, launch, results_root=tmp_path, progress=False).run()
    assert len(launch.calls) == 3
    assert df["state"].tolist() == ["failed", "failed", "succeeded"]
    assert df["sweep_status"].tolist() == ["failed", "failed", "ran"]
    assert "ParameterError" in df["error"].iloc[0] and "np=1" in df["error"].iloc[0]
    assert "RanksFailed" in df["error"].iloc[1] and "exit code 3" in df["error"].iloc[1]
    assert pd.isna(df["error"].iloc[2])
    assert pd.isna(df["run_dir"].iloc[0])  # nothing was launched
    saved = pd.read_parquet(tmp_path / EXPERIMENT / "summary.parquet")
    assert len(saved) == 3  # two run directories and the failure that left none
    assert saved["error"].notna().sum() == 2


def test_on_point_done_errors_do_not_stop_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(_: pd.DataFrame) -> None:
        raise RuntimeError("plot failed")

    launch = FakeLaunch(tmp_path)
    df = Sweep(
        EXPERIMENT, POINTS[:2], launch, key="np", results_root=tmp_path, on_point_done=broken
    ).run()
    assert len(df) == 2 and len(launch.calls) == 2
    assert df.columns[0] == "np"  # the key's names lead the summary
    assert "2/2" in capsys.readouterr().err  # the text progress bar outside notebooks


def test_live_figure_displays_once_then_updates_in_place(tmp_path: Path) -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell_existed = InteractiveShell.initialized()
    InteractiveShell.instance()
    live = LiveFigure(lambda df: throughput_vs_workers(df, title="live"))
    launch = FakeLaunch(tmp_path)
    try:
        with capture_output() as captured:
            Sweep(
                EXPERIMENT,
                POINTS,
                launch,
                results_root=tmp_path,
                on_point_done=live,
                progress=False,
            ).run()
    finally:
        if not shell_existed:
            InteractiveShell.clear_instance()
    outputs = captured.outputs
    assert len(outputs) == 3
    ids = {(o.transient or {}).get("display_id") for o in outputs}
    assert len(ids) == 1 and None not in ids  # one display ...
    assert [o.update for o in outputs] == [False, True, True]  # ... updated in place twice
    last = outputs[-1].data["application/vnd.plotly.v1+json"]
    measured = next(t for t in last["data"] if t["name"] == "lab")
    assert measured["x"] == [1, 2, 4]
    assert "text/plain" in outputs[-1].data
