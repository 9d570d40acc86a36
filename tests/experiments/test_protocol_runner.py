"""The protocol runner on run directories with known step times, and on real tiny runs."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest

from lab.cluster.rundir import new_run_dir, write_manifest
from lab.errors import ParameterError
from lab.experiments.evidence import protocol_run_dirs
from lab.experiments.protocol_runner import (
    RUN_COLUMNS,
    SUMMARY_COLUMNS,
    run_protocol,
    steady_throughput,
)
from lab.metrics.protocol import Target, overhead, speedup, throughput
from lab.metrics.records import format_record


def _write_run(root: Path, ranks: dict[int, list[float]], samples: int = 32) -> Path:
    """A run directory as the supervisor leaves it: manifest and one log per rank."""
    run_dir = new_run_dir("protocol", root)
    write_manifest(run_dir, experiment="protocol", params={}, state="succeeded")
    for rank, times in ranks.items():
        lines = [format_record("header", rank=rank, model="tiny_cnn")]
        lines += [
            format_record("step", rank=rank, step=i, samples=samples, seconds=t, warmup=i < 2)
            for i, t in enumerate(times)
        ]
        (run_dir / f"rank-{rank}.log").write_text("\n".join(lines) + "\n")
    return run_dir


def test_steady_throughput_cuts_each_ranks_warm_up(tmp_path: Path) -> None:
    """Rank 0 warms up for 3 steps, rank 1 for 1; the detector finds both, not a fixed 2."""
    run = _write_run(tmp_path, {0: [2.0, 1.0, 0.5] + [0.1] * 20, 1: [3.0] + [0.2] * 20})
    found = steady_throughput(run)
    assert found["ranks"] == 2 and found["steady_start"] == 3
    assert found["steps"] == 40
    assert found["total"] == pytest.approx(32 / 0.1 + 32 / 0.2)
    assert found["per_rank"] == pytest.approx(found["total"] / 2)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_runs_until_the_overhead_is_resolved(tmp_path: Path) -> None:
    """A 10% overhead under 2% step noise: resolved after a few interleaved rounds."""
    rng = random.Random(0)
    clock = FakeClock()
    order = []

    def run_one(point: dict) -> Path:
        order.append(point["name"])
        clock.now += 5.0
        base = point["step"]
        return _write_run(tmp_path, {0: [1.5, *(rng.gauss(base, base * 0.02) for _ in range(30))]})

    points = [{"name": "monitored", "step": 0.11}, {"name": "plain", "step": 0.1}]
    table = run_protocol(
        points,
        run_one,
        [overhead("monitored", "plain"), throughput("plain")],
        Target(rel_ci=0.01, budget_s=300.0),
        keys=["monitored", "plain"],
        clock=clock,
    )
    assert list(table.columns) == SUMMARY_COLUMNS
    row = table.set_index("quantity").loc["overhead(monitored vs plain)"]
    assert row["value"] == pytest.approx(1 - 0.1 / 0.11, abs=0.01)
    assert bool(row["resolved"]) and row["direction"] == 1 and row["reason"] == "precise"
    assert row["repeats"] >= 3 and row["seconds"] == pytest.approx(5.0 * len(order))
    assert "resolved, above 0%" in row["sentence"]
    assert order[:4] == ["monitored", "plain", "plain", "monitored"]
    runs = table.attrs["runs"]
    assert list(runs.columns) == RUN_COLUMNS and len(runs) == len(order)
    assert (runs["steady_start"] >= 1).all() and (runs["steady_start"] <= 15).all()


def test_failed_runs_are_missing_values(tmp_path: Path) -> None:
    clock = FakeClock()

    def run_one(point: dict) -> Path | None:
        clock.now += 1.0
        return None if point["fail"] else _write_run(tmp_path, {0: [1.0] + [0.1] * 10})

    table = run_protocol(
        [{"fail": False}, {"fail": True}],
        run_one,
        [speedup(0, 1)],
        Target(budget_s=4.0),
        clock=clock,
    )
    row = table.iloc[0]
    assert row["repeats"] == 0 and not row["resolved"] and row["reason"] == "budget"
    assert math.isnan(row["value"])
    assert table.attrs["runs"]["ok"].tolist() == [True, False, False, True]


def _write_phased_run(root: Path, off: float, on: float, block: int = 3) -> Path:
    """A run that switched a feature off and on every ``block`` steps after a slow start."""
    run_dir = new_run_dir("protocol", root)
    write_manifest(run_dir, experiment="protocol", params={}, state="succeeded")
    lines = [format_record("header", rank=0, model="tiny_cnn")]
    for i in range(2 + 8 * block):
        phase = "off" if i < 2 or ((i - 2) // block) % 2 == 0 else "on"
        seconds = 1.0 if i < 2 else (off if phase == "off" else on)
        lines.append(format_record("step", rank=0, step=i, samples=32, seconds=seconds,
                                   phase=phase))  # fmt: skip
    (run_dir / "rank-0.log").write_text("\n".join(lines) + "\n")
    return run_dir


def test_phases_of_one_run_share_its_launch_each_round(tmp_path: Path) -> None:
    """Points equal but for ``phase`` launch once a round (without ``phase``); each reads
    its own phase's steady throughput, so the overhead is paired within the run."""
    clock = FakeClock()
    launched: list[dict] = []

    def run_one(point: dict) -> Path:
        launched.append(dict(point))
        clock.now += 10.0
        slow = 0.1 * (1 + 0.3 * (len(launched) % 2))  # runs differ by 30%, phases by 10%
        return _write_phased_run(tmp_path, off=slow, on=slow / 0.9)

    run = {"system": "kungfu-monitor", "monitor": "variance", "alternate": 3}
    table = run_protocol(
        [{**run, "phase": "on"}, {**run, "phase": "off"}],
        run_one,
        [overhead("on", "off")],
        Target(rel_ci=0.01, budget_s=1000.0, min_repeats=4),
        keys=["on", "off"],
        clock=clock,
    )
    assert launched == [run] * 4  # one launch a round, and no phase on its command line
    row = table.iloc[0]
    assert row["value"] == pytest.approx(0.1) and row["ci"] == pytest.approx(0.0, abs=1e-9)
    assert row["repeats"] == 4 and bool(row["resolved"])
    runs = table.attrs["runs"]
    assert len(runs) == 8 and runs["run_dir"].nunique() == 4
    assert len(protocol_run_dirs(table)) == 4


def test_a_phase_the_run_lacks_has_no_value(tmp_path: Path) -> None:
    run = _write_run(tmp_path, {0: [1.0] + [0.1] * 10})
    assert steady_throughput(run, phase="on")["ranks"] == 0
    assert math.isnan(steady_throughput(run, phase="on")["total"])


def test_bad_arguments_fail_before_any_run() -> None:
    def never(point: dict) -> None:
        raise AssertionError("ran")

    with pytest.raises(ParameterError):
        run_protocol([{}], never, measure="mean")
    with pytest.raises(ParameterError):
        run_protocol([{}, {}], never, keys=["a", "a"])
    with pytest.raises(ParameterError):
        run_protocol([{}], never, [speedup(0, 7)])

    def bad_point(point: dict) -> None:
        raise ParameterError("model", "nope", "tiny_cnn, small_cnn")

    with pytest.raises(ParameterError, match="model"):
        run_protocol([{}], bad_point)


@pytest.mark.slow
def test_real_tiny_runs_within_a_tiny_budget(tmp_path: Path) -> None:
    """Two real TF runs (tiny_cnn, single backend) and a budget that allows one round."""
    from lab.cluster import launch

    def run_one(point: dict):
        argv = [sys.executable, "-m", "lab.bench.synthetic", "--backend", "single",
                "--model", "tiny_cnn", "--steps", "12", "--warmup-steps", "0",
                "--batch-size", str(point["batch_size"]), "--image-size", "16"]  # fmt: skip
        return launch(argv, experiment="protocol", params=point, view=None, timeout=120,
                      results_root=tmp_path, check=False)  # fmt: skip

    points = [{"batch_size": 8}, {"batch_size": 32}]
    table = run_protocol(
        points,
        run_one,
        [speedup("b32", "b8"), throughput("b8")],
        Target(rel_ci=0.02, budget_s=1.0),
        keys=["b8", "b32"],
    )
    runs = table.attrs["runs"]
    assert runs["ok"].all() and len(runs) == 2, runs
    assert (runs["value"] > 0).all() and (runs["steady_start"] >= 1).all()
    assert all(Path(d, "manifest.json").is_file() for d in runs["run_dir"])
    row = table.set_index("quantity").loc["speedup(b32 vs b8)"]
    assert row["repeats"] == 1 and not row["resolved"] and row["reason"] == "budget"
    assert row["value"] > 0 and row["seconds"] >= runs["seconds"].sum()
    assert "not resolved at this scale within" in row["sentence"]
